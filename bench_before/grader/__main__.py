from grader.cli import entry

if __name__ == "__main__":  # not in the judge processes that multiprocessing starts
    entry()
