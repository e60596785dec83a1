"""Programs of realistic size for benchmarks/rewards.py: functions checked by several asserts and stdin/stdout
programs, each right or with a bug, plus one that never ends on one of its inputs."""

LIS = '''\
from bisect import bisect_left


def longest_increasing(values):
    """Length of the longest strictly increasing subsequence."""
    tails = []
    for value in values:
        index = bisect_left(tails, value)
        if index == len(tails):
            tails.append(value)
        else:
            tails[index] = value
    return len(tails)
'''
LIS_TESTS = ["assert longest_increasing([10, 9, 2, 5, 3, 7, 101, 18]) == 4",
             "assert longest_increasing([0, 1, 0, 3, 2, 3]) == 4",
             "assert longest_increasing([7, 7, 7, 7]) == 1",
             "assert longest_increasing([]) == 0"]

INTERVALS = '''\
def merge_intervals(intervals):
    """Merge overlapping [start, end] intervals, sorted by start."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged
'''
INTERVALS_TESTS = ["assert merge_intervals([[1, 3], [2, 6], [8, 10], [15, 18]]) == [[1, 6], [8, 10], [15, 18]]",
                   "assert merge_intervals([[1, 4], [4, 5]]) == [[1, 5]]",
                   "assert merge_intervals([[5, 7], [1, 2]]) == [[1, 2], [5, 7]]",
                   "assert merge_intervals([]) == []"]

ROMAN = '''\
NUMERALS = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
            (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def to_roman(number):
    parts = []
    for value, letters in NUMERALS:
        count, number = divmod(number, value)
        parts.append(letters * count)
    return "".join(parts)


def from_roman(text):
    values = {letters: value for value, letters in NUMERALS if len(letters) == 1}
    total = 0
    for current, following in zip(text, text[1:] + " "):
        value = values[current]
        total += -value if following != " " and values[following] > value else value
    return total
'''
ROMAN_TESTS = ["assert to_roman(1994) == 'MCMXCIV'", "assert from_roman('MCMXCIV') == 1994",
               "assert all(from_roman(to_roman(n)) == n for n in range(1, 500))", "assert to_roman(4) == 'IV'"]

TOP_WORDS = '''\
from collections import Counter
import re


def top_words(text, k):
    """The k most frequent words (lower case), ties broken alphabetically."""
    counts = Counter(re.findall(r"[a-z']+", text.lower()))
    return [word for word, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:k]]
'''
TOP_WORDS_TESTS = ["assert top_words('the cat and the hat and the bat', 2) == ['the', 'and']",
                   "assert top_words('b a c b a', 3) == ['a', 'b', 'c']",
                   "assert top_words('', 5) == []",
                   "assert top_words('It is what it is', 1) == ['is']"]

KADANE = '''\
import sys


def main():
    data = sys.stdin.read().split()
    n = int(data[0])
    values = list(map(int, data[1:1 + n]))
    best = current = values[0]
    for value in values[1:]:
        current = max(value, current + value)
        best = max(best, current)
    print(best)


main()
'''
KADANE_TESTS = [{"input": "9\n-2 1 -3 4 -1 2 1 -5 4\n", "output": "6\n"}, {"input": "1\n-7\n", "output": "-7\n"},
                {"input": "5\n1 2 3 4 5\n", "output": "15\n"}, {"input": "4\n-1 -2 5 -1\n", "output": "5\n"}]

BFS = '''\
from collections import deque


def shortest(n, edges, source, target):
    graph = [[] for _ in range(n)]
    for a, b in edges:
        graph[a].append(b)
        graph[b].append(a)
    distance = [-1] * n
    distance[source] = 0
    queue = deque([source])
    while queue:
        node = queue.popleft()
        for neighbour in graph[node]:
            if distance[neighbour] < 0:
                distance[neighbour] = distance[node] + 1
                queue.append(neighbour)
    return distance[target]


n, m = map(int, input().split())
edges = [tuple(map(int, input().split())) for _ in range(m)]
source, target = map(int, input().split())
print(shortest(n, edges, source, target))
'''
BFS_TESTS = [{"input": "4 3\n0 1\n1 2\n2 3\n0 3\n", "output": "3\n"},
             {"input": "4 2\n0 1\n2 3\n0 3\n", "output": "-1\n"},
             {"input": "3 3\n0 1\n1 2\n0 2\n0 2\n", "output": "1\n"},
             {"input": "1 0\n0 0\n", "output": "0\n"}]

DISTINCT = '''\
import sys

words = set()
for line in sys.stdin:
    words.update(word.strip(".,!?").lower() for word in line.split())
words.discard("")
print(len(words))
for word in sorted(words):
    print(word)
'''
DISTINCT_TESTS = [{"input": "a b a\nB c\n", "output": "3\na\nb\nc\n"}, {"input": "\n", "output": "0\n"},
                  {"input": "Hello, hello world!\n", "output": "2\nhello\nworld\n"},
                  {"input": "x\n", "output": "1\nx\n"}]

PRIMES = '''\
def sieve(limit):
    is_prime = bytearray([1]) * (limit + 1)
    is_prime[:2] = b"\\x00\\x00"
    for n in range(2, int(limit ** 0.5) + 1):
        if is_prime[n]:
            is_prime[n * n :: n] = bytearray(len(range(n * n, limit + 1, n)))
    return [n for n, flag in enumerate(is_prime) if flag]


limit = int(input())
primes = sieve(limit)
print(len(primes), primes[-1] if primes else 0)
'''
PRIMES_TESTS = [{"input": "10\n", "output": "4 7\n"}, {"input": "100000\n", "output": "9592 99991\n"},
                {"input": "1\n", "output": "0 0\n"}, {"input": "2\n", "output": "1 2\n"}]

# (source, tests, bug): the bug is a (wrong, replacement) edit that makes some or all tests fail.
TASKS = [
    (LIS, LIS_TESTS, ("index == len(tails)", "index >= len(tails) - 1")),
    (INTERVALS, INTERVALS_TESTS, ("start <= merged[-1][1]", "start < merged[-1][1]")),
    (ROMAN, ROMAN_TESTS, ('(900, "CM"), ', "")),
    (TOP_WORDS, TOP_WORDS_TESTS, ("(-item[1], item[0])", "(item[1], item[0])")),
    (KADANE, KADANE_TESTS, ("best = current = values[0]", "best = current = 0")),
    (BFS, BFS_TESTS, ("distance[source] = 0", "distance[source] = 1")),
    (DISTINCT, DISTINCT_TESTS, ('.lower()', '')),
    (PRIMES, PRIMES_TESTS, ("limit ** 0.5", "undefined_name ** 0.5")),
]
# Never ends on the first KADANE test (the only one with a -3 in it).
HANGS = KADANE.replace("    best = current = values[0]\n",
                       "    while -3 in values:\n        values.sort()\n    best = current = values[0]\n")


def programs(count: int) -> list[tuple[str, list]]:
    """`count` (source, tests) programs: about three in four right, one in four with a bug, and one in every 48 that
    never ends on one of its tests."""
    chosen = []
    for i in range(count):
        source, tests, (wrong, replacement) = TASKS[i % len(TASKS)]
        if i % 48 == 47:
            source, tests = HANGS, KADANE_TESTS
        elif (i + i // len(TASKS)) % 4 == 3:
            source = source.replace(wrong, replacement)
        chosen.append((source, tests))
    return chosen
