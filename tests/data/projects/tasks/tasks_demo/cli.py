def main() -> None:
    print("tasks-demo")
