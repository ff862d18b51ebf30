//! Each row's fingerprint (`source::message::fingerprint`, the one definition of "the same
//! stored bytes") from the table: its descriptor and the frame's inline hash, and only for a
//! frame without one, the frame's bytes.

use super::Table;
use crate::errors::{CoreError, CoreResult};
use crate::source::mapped_file::MappedFile;
use crate::source::message::{Stored, Summary};

impl Table {
    /// Every row's fingerprint; `frame(row)` gives the bytes of the frames that carry no inline
    /// hash (`None`: not at hand, and the row's fingerprint is unknown).
    pub fn fingerprints<'a>(&self, mut frame: impl FnMut(usize) -> CoreResult<Option<&'a [u8]>>) -> CoreResult<Vec<Option<u64>>> {
        let summaries: Vec<Summary> = self.descriptors.iter().map(Summary::of).collect();
        (0..self.msg.len())
            .map(|row| {
                let summary = &summaries[self.descriptor[row] as usize];
                if self.has_frame_hash[row] {
                    return Ok(Some(summary.fingerprint(Stored::FrameHash(self.frame_hash[row]))));
                }
                Ok(frame(row)?.map(|bytes| summary.fingerprint(Stored::Frame(bytes))))
            })
            .collect()
    }

    /// Row `row`'s fingerprint where its frame's inline hash gives it (no byte of the file read).
    pub fn hashed_fingerprint(&self, row: usize) -> Option<u64> {
        let descriptor = &self.descriptors[self.descriptor[row] as usize];
        self.has_frame_hash[row].then(|| Summary::of(descriptor).fingerprint(Stored::FrameHash(self.frame_hash[row])))
    }

    /// Every row's fingerprint, the frames without an inline hash hashed in `file`, the file
    /// this table is of (a format error where its messages are not the table's).
    pub fn fingerprints_in(&self, file: &MappedFile) -> CoreResult<Vec<u64>> {
        let spans = file.spans();
        let same = spans.len() == self.n_messages
            && spans.iter().zip(self.message_offset.iter().zip(&self.message_length)).all(|(&(o, n), (&to, &tn))| o as i64 == to && n as i64 == tn);
        if !same {
            return Err(CoreError::format(format!("{}: the table is not of this file (its messages differ)", file.path())));
        }
        self.fingerprints(|row| {
            let msg = self.msg[row] as usize;
            let offset = self.message_offset[msg];
            let (start, end) = ((self.frame_start[row] - offset) as usize, (self.frame_end[row] - offset) as usize);
            file.message_bytes(msg).get(start..end).map(Some).ok_or_else(|| {
                CoreError::format(format!("{}: message {msg}, object {}: its frame is outside its message", file.path(), self.obj[row]))
            })
        })?
        .into_iter()
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| CoreError::format(format!("{}: an object's frame was not at hand", file.path())))
    }
}

#[cfg(test)]
mod tests {
    use crate::source::message::ParsedMessage;
    use crate::table::tests::message;

    #[test]
    fn the_table_gives_each_object_the_fingerprint_of_its_parsed_frame() {
        // One frame with an inline hash, one without: the table's and the parse's agree.
        let (a, b) = (message(0, true), message(6, false));
        let table = crate::table::scan([(0, &a[..]), (a.len(), &b[..])], |m| format!("message {m}")).expect("scans");
        let parsed = |bytes: &[u8]| ParsedMessage::parse(bytes).expect("parses").objects[0].fingerprint(bytes);
        let frames = |row: usize| {
            let (start, end) = (table.frame_start[row] as usize - a.len(), table.frame_end[row] as usize - a.len());
            Ok((row == 1).then(|| &b[start..end]))
        };
        let prints = table.fingerprints(frames).expect("fingerprints");
        assert_eq!(prints, [Some(parsed(&a)), Some(parsed(&b))]);
        assert_eq!((table.hashed_fingerprint(0), table.hashed_fingerprint(1)), (prints[0], None));
        assert_ne!(prints[0], prints[1]);
        // Without the unhashed frame at hand, its fingerprint is unknown.
        assert_eq!(table.fingerprints(|_| Ok(None)).expect("fingerprints")[1], None);
    }

    #[test]
    fn objects_stored_alike_share_a_fingerprint_and_others_do_not() {
        let same = [message(0, false), message(0, false)];
        let other = message(6, false); // another step: the metadata differs, the frame does not
        let values = |bytes: &[u8]| ParsedMessage::parse(bytes).expect("parses").objects[0].fingerprint(bytes);
        assert_eq!(values(&same[0]), values(&same[1]));
        assert_eq!(values(&same[0]), values(&other));
        let hashed = [message(0, true), message(6, true)];
        assert_eq!(values(&hashed[0]), values(&hashed[1]));
        assert_ne!(values(&hashed[0]), values(&same[0]), "an inline hash is not the frame's own hash");
    }
}
