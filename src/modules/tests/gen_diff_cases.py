# Records Python 3.11 difflib.unified_diff outputs as diff_test.cc's data:
#   python3 src/modules/tests/gen_diff_cases.py > src/modules/tests/diff_cases.json
import difflib, json, random
cases = []
def add(name, a, b, **kw):
    d = "".join(difflib.unified_diff(a, b, **kw))
    cases.append({"name": name, "a": a, "b": b, "kw": kw, "diff": d})
add("equal", ["x\n", "y\n"], ["x\n", "y\n"])
add("both_empty", [], [])
add("from_empty", [], ["a\n", "b\n"])
add("to_empty", ["a\n", "b\n"], [])
add("one_line_changed", ["first line\n", "version v1\n", "last line\n"], ["first line\n", "version v2\n", "last line\n"])
add("no_newline_at_end", ["a\n", "b"], ["a\n", "b\n", "c"])
add("append_style", ["a", "b", "c", "d", "e"], ["a", "b", "c", "d", "e", "f", "g"])
add("two_hunks", [f"{i}\n" for i in range(30)], [f"{i}\n" if i not in (3, 25) else "x\n" for i in range(30)])
add("hunks_joined_at_6", [f"{i}\n" for i in range(20)], [f"{i}\n" if i not in (3, 10) else "x\n" for i in range(20)])
add("hunks_split_at_7", [f"{i}\n" for i in range(20)], [f"{i}\n" if i not in (3, 11) else "x\n" for i in range(20)])
add("insert_at_start", ["a\n", "b\n", "c\n", "d\n", "e\n"], ["new\n", "a\n", "b\n", "c\n", "d\n", "e\n"])
add("delete_at_end", ["a\n", "b\n", "c\n", "d\n", "e\n"], ["a\n", "b\n", "c\n", "d\n"])
add("filenames", ["a\n"], ["b\n"], fromfile="old.txt", tofile="new.txt")
add("dates", ["a\n"], ["b\n"], fromfile="o", tofile="n", fromfiledate="2024-01-01", tofiledate="2024-01-02")
add("context_1", [f"{i}\n" for i in range(12)], [f"{i}\n" if i != 6 else "x\n" for i in range(12)], n=1)
add("context_0", [f"{i}\n" for i in range(12)], [f"{i}\n" if i != 6 else "x\n" for i in range(12)], n=0)
add("lineterm_empty", ["a", "b"], ["a", "c"], lineterm="")
add("crlf", ["a\r\n", "b\r\n"], ["a\r\n", "c\r\n"])
add("repeated_lines", ["x\n"] * 5 + ["y\n"] + ["x\n"] * 5, ["x\n"] * 4 + ["y\n"] + ["x\n"] * 6)
# popular lines (autojunk) need 200+ lines in b
pop_a = ["\n" if i % 3 == 0 else f"line {i}\n" for i in range(240)]
pop_b = list(pop_a); pop_b[100] = "changed\n"; pop_b.insert(150, "\n"); del pop_b[30]
add("autojunk_popular_blank_lines", pop_a, pop_b)
pop_c = ["}\n", "{\n"] * 150
pop_d = list(pop_c); pop_d[10:12] = ["x\n"]; pop_d.insert(200, "y\n")
add("autojunk_all_popular", pop_c, pop_d)
rnd = random.Random(20240601)
alphabet = ["a\n", "b\n", "c\n", "d\n", "e\n", "\n", "f", "  g\n"]
for k in range(40):
    n = rnd.choice([0, 1, 3, 8, 20, 60, 210, 260])
    a = [rnd.choice(alphabet) for _ in range(n)]
    b = list(a)
    for _ in range(rnd.randint(0, 8)):
        op = rnd.choice("idr")
        pos = rnd.randint(0, len(b))
        if op == "i":
            b.insert(pos, rnd.choice(alphabet + ["new\n", "other\n"]))
        elif b and pos < len(b):
            if op == "d": del b[pos]
            else: b[pos] = rnd.choice(alphabet + ["new\n"])
    add(f"random_{k}", a, b)
print("[\n" + ",\n".join(json.dumps(c) for c in cases) + "\n]")
