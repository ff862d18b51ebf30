"""Tests of the package as a whole: its docs and examples, its layers, the wheel, upstream's tests,
the suite's own rules."""
