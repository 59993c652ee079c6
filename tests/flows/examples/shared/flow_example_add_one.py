def main(n):
    return n + 1
