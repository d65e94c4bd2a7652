"""A chaos run: faults and spec changes at seeded random, under real client load, with invariants.

`python -m valkey_testbed chaos --seed N --minutes M` (see run.py). The
schedule (schedule.py) is a pure function of the seed, so a violation's seed
and step number reproduce the same sequence of faults and changes.
"""
