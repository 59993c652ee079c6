def main():
    return "b"
