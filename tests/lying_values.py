"""Subclasses of the constant types whose ``repr``, ``==`` and ``hash`` lie (every instance
equals every other, hashes alike, prints alike), and whose own arithmetic, length or
indexing differs from their base type's: a key or a memo that trusted any of them would
serve one value's kernel to another. (The tests of subclasses and the stale-kernel fuzzer
share them.)"""


class Liar:
    def __repr__(self):
        return "Liar"

    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


class LyingStr(Liar, str):
    def __len__(self):
        return 1


class LyingInt(Liar, int):
    def __add__(self, other):
        return 100

    def __int__(self):
        return 100


class LyingFloat(Liar, float):
    def __mul__(self, other):
        return 100.0

    def __float__(self):
        return 100.0


class LyingTuple(Liar, tuple):
    def __getitem__(self, index):
        return 100.0

    def __len__(self):
        return 0

    def __iter__(self):
        return iter(())
