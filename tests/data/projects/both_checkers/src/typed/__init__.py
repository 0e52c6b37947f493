def name() -> str:
    return 1
