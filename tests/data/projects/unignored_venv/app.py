def main() -> None:
    print("marker-string")
