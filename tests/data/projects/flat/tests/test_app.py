from app import add


def test_add():
    assert add(1, 2) == 3


def test_broken():
    expected = "the whole message, " * 12
    assert add(1, 1) == 3, expected + "and its end"
