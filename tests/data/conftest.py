"""Fixture projects are data: their tests run only inside the tests that copy them."""

collect_ignore = ["projects"]
