#include "render/yaml.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace brine::render {
namespace {

struct load_case {
  std::string yaml;
  // Python's repr() of what Salt 3006's SaltYamlSafeLoader returns.
  std::string repr;
};

// Expected values: repr(salt.utils.yamlloader.load(yaml)) under Salt 3006.26
// and PyYAML.
TEST(LoadYaml, MatchesSaltYamlSafeLoader) {
  const std::vector<load_case> rows = {
      {"a: 0644\nb: 0\nc: 00\nd: 0_644\ne: -0644\nf: +0644\ng: 0x1f\nh: 0b101\ni: 1_000\nj: "
       "0o7\nk: 0899\n",
       "{'a': 644, 'b': 0, 'c': 0, 'd': 644, 'e': -420, 'f': 420, 'g': 31, 'h': 5, 'i': 1000, "
       "'j': '0o7', 'k': '0899'}"},
      {"- yes\n- No\n- ON\n- off\n- y\n- n\n- True\n- FALSE\n- tRue\n",
       "[True, False, True, False, 'y', 'n', True, False, 'tRue']"},
      {"- ~\n- null\n- Null\n- \n- 'null'\n- \"yes\"\n", "[None, None, None, None, 'null', 'yes']"},
      {"- 1.5\n- .5\n- 1.0e+3\n- .inf\n- -.Inf\n- 1e3\n- 1.\n",
       "[1.5, 0.5, 1000.0, inf, -inf, '1e3', 1.0]"},
      {"a: 2001-12-14\nb: 2001-12-14t21:59:43.10-05:00\nc: !!timestamp 2001-12-14\n",
       "{'a': '2001-12-14', 'b': '2001-12-14t21:59:43.10-05:00', 'c': '2001-12-14'}"},
      {"a: !!python/unicode x\nb: !!str 12\nc: !!int '7'\nd: !!float '1'\ne: !!bool 'yes'\n",
       "{'a': 'x', 'b': '12', 'c': 7, 'd': 1.0, 'e': True}"},
      {"z: 1\na: 2\nm: {y: 1, b: 2}\n", "{'z': 1, 'a': 2, 'm': {'y': 1, 'b': 2}}"},
      {"base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n",
       "{'base': {'x': 1, 'y': 2}, 'd': {'x': 1, 'y': 3}}"},
      {"a: &a {x: 1}\nb: &b {k: b, j: b}\nc:\n  <<: [*a, *b]\n  z: 0\n",
       "{'a': {'x': 1}, 'b': {'k': 'b', 'j': 'b'}, 'c': {'k': 'b', 'j': 'b', 'x': 1, 'z': 0}}"},
      {"1: a\n'1': b\n1.5: c\nnull: d\nfalse: e\n",
       "{1: 'a', '1': 'b', 1.5: 'c', None: 'd', False: 'e'}"},
      {"", "None"},
      {"# just a comment\n", "None"},
      {"plain\n", "'plain'"},
      {"[1, 2, [3, {a: b}]]\n", "[1, 2, [3, {'a': 'b'}]]"},
      {"a: |\n  line1\n  line2\nb: >\n  folded\n  text\n",
       "{'a': 'line1\\nline2\\n', 'b': 'folded text\\n'}"},
  };
  for (const auto& r : rows) {
    EXPECT_EQ(load_yaml_value(r.yaml, "x.sls").repr(), r.repr) << r.yaml;
  }
}

struct error_case {
  std::string yaml;
  int line;
  int column;
  std::string message;
};

TEST(LoadYaml, ErrorsNamePositionAndProblem) {
  const std::vector<error_case> rows = {
      // Salt: "found conflicting ID 'True'" at the second key (line 5, column 1).
      {"1: a\n'1': b\n1.5: c\nnull: d\ntrue: e\n", 5, 1, "found conflicting ID 'True'"},
      {"a: 1\nb: 2\na: 3\n", 3, 1, "found conflicting ID 'a'"},
      // Merged entries are not deduplicated among themselves (Salt's flatten_mapping).
      {"a: &a {x: 1}\nb: &b {x: 2}\nc:\n  <<: [*a, *b]\n", 1, 8, "found conflicting ID 'x'"},
      // libyaml's words (PyYAML's C loader, which Salt uses), context after the problem.
      {"a: [1, 2\nb: 3\n", 2, 2,
       "did not find expected ',' or ']' (while parsing a flow sequence at line 1 column 4)"},
      // At the second document's start, as PyYAML's composer says it.
      {"a: 1\n---\nb: 2\n", 2, 1, "expected a single document in the stream, but found another"},
      {"a: !!binary aGk=\n", 1, 4,
       "could not determine a constructor for the tag 'tag:yaml.org,2002:binary'"},
      {"? [a, b]\n: 1\n", 1, 3, "found unacceptable key"},
      {"a:\n  <<: 3\n", 2, 7,
       "expected a mapping or list of mappings for merging, but found scalar"},
      {"a:\n  <<: [3]\n", 2, 8, "expected a mapping for merging, but found scalar"},
  };
  for (const auto& r : rows) {
    try {
      load_yaml_value(r.yaml, "x.sls");
      ADD_FAILURE() << "no error for " << r.yaml;
    } catch (const yaml_error& e) {
      EXPECT_EQ(e.line(), r.line) << r.yaml;
      EXPECT_EQ(e.column(), r.column) << r.yaml;
      EXPECT_EQ(e.message(), r.message) << r.yaml;
      EXPECT_EQ(std::string(e.what()), "x.sls line " + std::to_string(r.line) + " column " +
                                           std::to_string(r.column) + ": " + r.message);
    }
  }
}

TEST(LoadYaml, JsonKeepsDocumentOrderOrSortsKeys) {
  const char* text = "z: 1\na: {y: 0644, b: [yes, '0644']}\n";
  EXPECT_EQ(load_yaml<nlohmann::ordered_json>(text, "t").dump(),
            R"({"z":1,"a":{"y":644,"b":[true,"0644"]}})");
  EXPECT_EQ(load_yaml<nlohmann::json>(text, "t").dump(),
            R"({"a":{"b":[true,"0644"],"y":644},"z":1})");
  // Json keys are strings; 1 and '1' stay two keys as in Python.
  EXPECT_THROW(load_yaml<nlohmann::json>("1: a\n1: b\n", "t"), yaml_error);
  EXPECT_EQ(load_yaml<nlohmann::ordered_json>("1: a\n'2': b\n", "t").dump(),
            R"({"1":"a","2":"b"})");
  EXPECT_TRUE(load_yaml<nlohmann::json>("", "t").is_null());
}

// yaml-cpp 0.7, brine's loader before libyaml, looped without end on a `,`
// where a node should start. Each load runs in a thread with a deadline: a
// hang stops the test binary instead of the suite. Messages and positions
// are those of PyYAML's C loader (checked with PyYAML 6.0 and libyaml 0.2.5).
TEST(LoadYaml, GarbageIsAnErrorNotAHang) {
  const std::string block_node = "did not find expected node content (while parsing a block node)";
  const std::string document_start = "did not find expected <document start>";
  const std::vector<error_case> rows = {
      {",,,,,,,,,,,,,,,,,,,}{}}", 1, 1, block_node},
      {",", 1, 1, block_node},
      {",}", 1, 1, block_node},
      {" ,}", 1, 2, block_node},
      {"&x ,", 1, 4, document_start},
      {"!!str ,", 1, 7, document_start},
      {"[a]\n,", 2, 1, document_start},
      {"a: 1\n---\n,", 2, 1, "expected a single document in the stream, but found another"},
      {"--- ,", 1, 5, block_node},
      {"{]", 1, 2, "did not find expected node content (while parsing a flow node)"},
      {"]]]", 1, 1, block_node},
      {"[[[[", 2, 1, "did not find expected node content (while parsing a flow node)"},
      {"{a: b}}", 1, 7, document_start},
      {"- a\nb: c", 2, 1,
       "did not find expected '-' indicator (while parsing a block collection at line 1 column "
       "1)"},
      {"a: 'x", 1, 6,
       "found unexpected end of stream (while scanning a quoted scalar at line 1 column 4)"},
      {"\t- a", 1, 1,
       "found character that cannot start any token (while scanning for the next token)"},
      {"*", 1, 2,
       "did not find expected alphabetic or numeric character (while scanning an alias at line 1 "
       "column 1)"},
      {"a: *y\n", 1, 4, "found undefined alias 'y'"},
      {"a: &x 1\nb: &x 2\n", 2, 4, "found duplicate anchor 'x' (first at line 1 column 4)"},
      {"a: \x01\n", 1, 4, "unacceptable character #x0001: control characters are not allowed"},
      // Nine levels of ten aliases: a billion leaves from a few hundred bytes.
      {"a: &a [x, x, x, x, x, x, x, x, x, x]\n"
       "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
       "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
       "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
       "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
       "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
       "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
       "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n",
       0, 0, "the document expands to too many nodes through aliases"},
  };
  for (const auto& r : rows) {
    auto result = std::make_shared<std::promise<std::string>>();
    std::future<std::string> done = result->get_future();
    std::thread([result, text = r.yaml] {
      try {
        load_yaml_value(text, "x.sls");
        result->set_value("no error");
      } catch (const yaml_error& e) {
        result->set_value(e.what());
      }
    }).detach();
    // A hang detector, not a timing: the alias bomb takes 2.5 s under ASan
    // on an idle core, over 5 s on a loaded one.
    if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      std::cerr << "load_yaml did not return within 60 s on " << r.yaml << "\n";
      std::abort();
    }
    std::string got = done.get();
    if (r.line == 0) {
      EXPECT_TRUE(got.ends_with(": " + r.message)) << got;
      continue;
    }
    EXPECT_EQ(got, "x.sls line " + std::to_string(r.line) + " column " + std::to_string(r.column) +
                       ": " + r.message)
        << r.yaml;
  }
  // Commas inside a plain scalar or a flow collection are fine.
  EXPECT_EQ(load_yaml_value("a,}\n", "t").repr(), "'a,}'");
  EXPECT_EQ(load_yaml_value("[a, b]\n", "t").repr(), "['a', 'b']");
}

// salt_message() is str() of PyYAML's MarkedYAMLError, which Salt's yaml
// renderer reports (ScannerErrors by their problem alone).
TEST(LoadYaml, SaltMessageIsPyYamls) {
  auto salt_message = [](const std::string& text) {
    try {
      load_yaml_value(text, "x.sls");
    } catch (const yaml_error& e) {
      return e.salt_message();
    }
    return std::string("no error");
  };
  EXPECT_EQ(salt_message("a: [1, 2\nb: 3\n"),
            "while parsing a flow sequence\n  in \"<unicode string>\", line 1, column 4\n"
            "did not find expected ',' or ']'\n  in \"<unicode string>\", line 2, column 2");
  EXPECT_EQ(salt_message(","),
            "while parsing a block node\ndid not find expected node content\n"
            "  in \"<unicode string>\", line 1, column 1");
  EXPECT_EQ(salt_message("a: 1\n---\nb: 2\n"),
            "expected a single document in the stream\n  in \"<unicode string>\", line 1, "
            "column 1\nbut found another document\n  in \"<unicode string>\", line 2, column 1");
  EXPECT_EQ(salt_message("a: *y\n"),
            "found undefined alias\n  in \"<unicode string>\", line 1, column 4");
  EXPECT_EQ(salt_message("a: 'x"), "found unexpected end of stream");
  EXPECT_EQ(salt_message("a: 1\nb: 2\na: 3\n"),
            "while constructing a mapping\n  in \"<unicode string>\", line 1, column 1\n"
            "found conflicting ID 'a'\n  in \"<unicode string>\", line 3, column 1");
}

TEST(LoadYaml, RecursiveAliasIsAnError) {
  EXPECT_THROW(load_yaml_value("a: &x [*x]\n", "t"), yaml_error);
}

struct dump_case {
  std::string json;
  yaml_dump_options::flow flow;
  std::string yaml;
};

// Expected: salt.utils.yaml.safe_dump(json.loads(json), default_flow_style=
// True/False/None).strip() without a trailing "\n...", as the yaml filter
// prints (Salt 3006.26 with PyYAML's libyaml emitter).
TEST(DumpYaml, MatchesSaltSafeDump) {
  const std::vector<dump_case> rows = {
      {"{\"b\": 1, \"a\": [1, 2.5, null, true], \"c\": {\"z\": \"yes\", \"y\": \"012\", \"x\": "
       "\"\"}}",
       yaml_dump_options::flow::always,
       "{a: [1, 2.5, null, true], b: 1, c: {x: '', y: '012', z: 'yes'}}"},
      {"\"plain text\"", yaml_dump_options::flow::always, "plain text"},
      {"\"yes\"", yaml_dump_options::flow::always, "'yes'"},
      {"\"1.5\"", yaml_dump_options::flow::always, "'1.5'"},
      {"\"a: b\"", yaml_dump_options::flow::always, "'a: b'"},
      {"\"- x\"", yaml_dump_options::flow::always, "'- x'"},
      {"\"#c\"", yaml_dump_options::flow::always, "'#c'"},
      {"\"x #c\"", yaml_dump_options::flow::always, "'x #c'"},
      {"\"with\\ttab\"", yaml_dump_options::flow::always, "\"with\\ttab\""},
      {"\"line1\\nline2\"", yaml_dump_options::flow::always, "'line1\n\n  line2'"},
      {"\"trailing \"", yaml_dump_options::flow::always, "'trailing '"},
      {"\"caf\\u00e9 \\ud83d\\ude00\"", yaml_dump_options::flow::always,
       "\"caf\xc3\xa9"
       " \\U0001F600\""},
      {"\"it's\"", yaml_dump_options::flow::always, "it's"},
      {"\"ends\\n\"", yaml_dump_options::flow::always, "'ends\n\n  '"},
      {"12", yaml_dump_options::flow::always, "12"},
      {"1e20", yaml_dump_options::flow::always, "1.0e+20"},
      {"1.5e-7", yaml_dump_options::flow::always, "1.5e-07"},
      {"-0.0", yaml_dump_options::flow::always, "-0.0"},
      {"[]", yaml_dump_options::flow::always, "[]"},
      {"{}", yaml_dump_options::flow::always, "{}"},
      {"null", yaml_dump_options::flow::always, "null"},
      {"[\"2001-12-14\", \"~\", \"Null\", \"0o17\", \"0x1F\", \"1_000\", \"<<\", \"=\", \"@at\", "
       "\"`b\", \"%p\", \"!t\", \"&a\", \"*s\", \"|\", \">\", \"?\", \"? x\", \"a?b\", \"-\", "
       "\"-x\", \"---\", \"...\"]",
       yaml_dump_options::flow::always,
       "['2001-12-14', '~', 'Null', 0o17, '0x1F', '1_000', '<<', '=', '@at', '`b', '%p', '!t',\n  "
       "'&a', '*s', '|', '>', '?', '? x', 'a?b', '-', -x, '---', '...']"},
      {"{\"list\": [\"aaaaaaaaaaaaaaa\", \"bbbbbbbbbbbbbbbbbb\", \"ccccccccccccccccccc\", "
       "\"dddddddddddddddd\", \"eeeeeeeeeeeee\", \"ffffffffff\"]}",
       yaml_dump_options::flow::always,
       "{list: [aaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbb, ccccccccccccccccccc, dddddddddddddddd,\n    "
       "eeeeeeeeeeeee, ffffffffff]}"},
      {"\"word word word word word word word word word word word word word word word word word "
       "word word word word\"",
       yaml_dump_options::flow::always,
       "word word word word word word word word word word word word word word word word word\n  "
       "word word word word"},
      {"[\"word word word word word word word word word word word word word word word word word "
       "word word word word\"]",
       yaml_dump_options::flow::always,
       "[word word word word word word word word word word word word word word word word word\n    "
       "word word word word]"},
      {"{\"k\": \"quoted \\\"x\\\" and more and more and more and more and more and more and more "
       "and more and more\\t\"}",
       yaml_dump_options::flow::always,
       "{k: \"quoted \\\"x\\\" and more and more and more and more and more and more and more "
       "and\n    more and more\\t\"}"},
      {"{\"nested\": {\"deep\": {\"list\": [{\"a\": 1}, {\"b\": [1, 2]}], \"s\": \"x\"}}, \"top\": "
       "[[1, 2], [3]]}",
       yaml_dump_options::flow::always,
       "{nested: {deep: {list: [{a: 1}, {b: [1, 2]}], s: x}}, top: [[1, 2], [3]]}"},
      {"{\"multi\": \"first line\\nsecond line\\n\"}", yaml_dump_options::flow::always,
       "{multi: 'first line\n\n    second line\n\n    '}"},
      {"{\"1\": \"a\", \"\": \"empty key\"}", yaml_dump_options::flow::always,
       "{'': empty key, '1': a}"},
      {"{\"b\": 1, \"a\": [1, 2.5, null, true], \"c\": {\"z\": \"yes\", \"y\": \"012\", \"x\": "
       "\"\"}}",
       yaml_dump_options::flow::never,
       "a:\n- 1\n- 2.5\n- null\n- true\nb: 1\nc:\n  x: ''\n  y: '012'\n  z: 'yes'"},
      {"\"plain text\"", yaml_dump_options::flow::never, "plain text"},
      {"\"yes\"", yaml_dump_options::flow::never, "'yes'"},
      {"\"1.5\"", yaml_dump_options::flow::never, "'1.5'"},
      {"\"a: b\"", yaml_dump_options::flow::never, "'a: b'"},
      {"\"- x\"", yaml_dump_options::flow::never, "'- x'"},
      {"\"#c\"", yaml_dump_options::flow::never, "'#c'"},
      {"\"x #c\"", yaml_dump_options::flow::never, "'x #c'"},
      {"\"with\\ttab\"", yaml_dump_options::flow::never, "\"with\\ttab\""},
      {"\"line1\\nline2\"", yaml_dump_options::flow::never, "'line1\n\n  line2'"},
      {"\"trailing \"", yaml_dump_options::flow::never, "'trailing '"},
      {"\"caf\\u00e9 \\ud83d\\ude00\"", yaml_dump_options::flow::never,
       "\"caf\xc3\xa9"
       " \\U0001F600\""},
      {"\"it's\"", yaml_dump_options::flow::never, "it's"},
      {"\"ends\\n\"", yaml_dump_options::flow::never, "'ends\n\n  '"},
      {"12", yaml_dump_options::flow::never, "12"},
      {"1e20", yaml_dump_options::flow::never, "1.0e+20"},
      {"1.5e-7", yaml_dump_options::flow::never, "1.5e-07"},
      {"-0.0", yaml_dump_options::flow::never, "-0.0"},
      {"[]", yaml_dump_options::flow::never, "[]"},
      {"{}", yaml_dump_options::flow::never, "{}"},
      {"null", yaml_dump_options::flow::never, "null"},
      {"[\"2001-12-14\", \"~\", \"Null\", \"0o17\", \"0x1F\", \"1_000\", \"<<\", \"=\", \"@at\", "
       "\"`b\", \"%p\", \"!t\", \"&a\", \"*s\", \"|\", \">\", \"?\", \"? x\", \"a?b\", \"-\", "
       "\"-x\", \"---\", \"...\"]",
       yaml_dump_options::flow::never,
       "- '2001-12-14'\n- '~'\n- 'Null'\n- 0o17\n- '0x1F'\n- '1_000'\n- '<<'\n- '='\n- '@at'\n- "
       "'`b'\n- '%p'\n- '!t'\n- '&a'\n- '*s'\n- '|'\n- '>'\n- '?'\n- '? x'\n- a?b\n- '-'\n- -x\n- "
       "'---'\n- '...'"},
      {"{\"list\": [\"aaaaaaaaaaaaaaa\", \"bbbbbbbbbbbbbbbbbb\", \"ccccccccccccccccccc\", "
       "\"dddddddddddddddd\", \"eeeeeeeeeeeee\", \"ffffffffff\"]}",
       yaml_dump_options::flow::never,
       "list:\n- aaaaaaaaaaaaaaa\n- bbbbbbbbbbbbbbbbbb\n- ccccccccccccccccccc\n- "
       "dddddddddddddddd\n- eeeeeeeeeeeee\n- ffffffffff"},
      {"\"word word word word word word word word word word word word word word word word word "
       "word word word word\"",
       yaml_dump_options::flow::never,
       "word word word word word word word word word word word word word word word word word\n  "
       "word word word word"},
      {"[\"word word word word word word word word word word word word word word word word word "
       "word word word word\"]",
       yaml_dump_options::flow::never,
       "- word word word word word word word word word word word word word word word word\n  word "
       "word word word word"},
      {"{\"k\": \"quoted \\\"x\\\" and more and more and more and more and more and more and more "
       "and more and more\\t\"}",
       yaml_dump_options::flow::never,
       "k: \"quoted \\\"x\\\" and more and more and more and more and more and more and more and\n "
       " more and more\\t\""},
      {"{\"nested\": {\"deep\": {\"list\": [{\"a\": 1}, {\"b\": [1, 2]}], \"s\": \"x\"}}, \"top\": "
       "[[1, 2], [3]]}",
       yaml_dump_options::flow::never,
       "nested:\n  deep:\n    list:\n    - a: 1\n    - b:\n      - 1\n      - 2\n    s: x\ntop:\n- "
       "- 1\n  - 2\n- - 3"},
      {"{\"multi\": \"first line\\nsecond line\\n\"}", yaml_dump_options::flow::never,
       "multi: 'first line\n\n  second line\n\n  '"},
      {"{\"1\": \"a\", \"\": \"empty key\"}", yaml_dump_options::flow::never,
       "'': empty key\n'1': a"},
      {"{\"b\": 1, \"a\": [1, 2.5, null, true], \"c\": {\"z\": \"yes\", \"y\": \"012\", \"x\": "
       "\"\"}}",
       yaml_dump_options::flow::leaves,
       "a: [1, 2.5, null, true]\nb: 1\nc: {x: '', y: '012', z: 'yes'}"},
      {"\"plain text\"", yaml_dump_options::flow::leaves, "plain text"},
      {"\"yes\"", yaml_dump_options::flow::leaves, "'yes'"},
      {"\"1.5\"", yaml_dump_options::flow::leaves, "'1.5'"},
      {"\"a: b\"", yaml_dump_options::flow::leaves, "'a: b'"},
      {"\"- x\"", yaml_dump_options::flow::leaves, "'- x'"},
      {"\"#c\"", yaml_dump_options::flow::leaves, "'#c'"},
      {"\"x #c\"", yaml_dump_options::flow::leaves, "'x #c'"},
      {"\"with\\ttab\"", yaml_dump_options::flow::leaves, "\"with\\ttab\""},
      {"\"line1\\nline2\"", yaml_dump_options::flow::leaves, "'line1\n\n  line2'"},
      {"\"trailing \"", yaml_dump_options::flow::leaves, "'trailing '"},
      {"\"caf\\u00e9 \\ud83d\\ude00\"", yaml_dump_options::flow::leaves,
       "\"caf\xc3\xa9"
       " \\U0001F600\""},
      {"\"it's\"", yaml_dump_options::flow::leaves, "it's"},
      {"\"ends\\n\"", yaml_dump_options::flow::leaves, "'ends\n\n  '"},
      {"12", yaml_dump_options::flow::leaves, "12"},
      {"1e20", yaml_dump_options::flow::leaves, "1.0e+20"},
      {"1.5e-7", yaml_dump_options::flow::leaves, "1.5e-07"},
      {"-0.0", yaml_dump_options::flow::leaves, "-0.0"},
      {"[]", yaml_dump_options::flow::leaves, "[]"},
      {"{}", yaml_dump_options::flow::leaves, "{}"},
      {"null", yaml_dump_options::flow::leaves, "null"},
      {"[\"2001-12-14\", \"~\", \"Null\", \"0o17\", \"0x1F\", \"1_000\", \"<<\", \"=\", \"@at\", "
       "\"`b\", \"%p\", \"!t\", \"&a\", \"*s\", \"|\", \">\", \"?\", \"? x\", \"a?b\", \"-\", "
       "\"-x\", \"---\", \"...\"]",
       yaml_dump_options::flow::leaves,
       "['2001-12-14', '~', 'Null', 0o17, '0x1F', '1_000', '<<', '=', '@at', '`b', '%p', '!t',\n  "
       "'&a', '*s', '|', '>', '?', '? x', 'a?b', '-', -x, '---', '...']"},
      {"{\"list\": [\"aaaaaaaaaaaaaaa\", \"bbbbbbbbbbbbbbbbbb\", \"ccccccccccccccccccc\", "
       "\"dddddddddddddddd\", \"eeeeeeeeeeeee\", \"ffffffffff\"]}",
       yaml_dump_options::flow::leaves,
       "list: [aaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbb, ccccccccccccccccccc, dddddddddddddddd,\n  "
       "eeeeeeeeeeeee, ffffffffff]"},
      {"\"word word word word word word word word word word word word word word word word word "
       "word word word word\"",
       yaml_dump_options::flow::leaves,
       "word word word word word word word word word word word word word word word word word\n  "
       "word word word word"},
      {"[\"word word word word word word word word word word word word word word word word word "
       "word word word word\"]",
       yaml_dump_options::flow::leaves,
       "[word word word word word word word word word word word word word word word word word\n    "
       "word word word word]"},
      {"{\"k\": \"quoted \\\"x\\\" and more and more and more and more and more and more and more "
       "and more and more\\t\"}",
       yaml_dump_options::flow::leaves,
       "{k: \"quoted \\\"x\\\" and more and more and more and more and more and more and more "
       "and\n    more and more\\t\"}"},
      {"{\"nested\": {\"deep\": {\"list\": [{\"a\": 1}, {\"b\": [1, 2]}], \"s\": \"x\"}}, \"top\": "
       "[[1, 2], [3]]}",
       yaml_dump_options::flow::leaves,
       "nested:\n  deep:\n    list:\n    - {a: 1}\n    - b: [1, 2]\n    s: x\ntop:\n- [1, 2]\n- "
       "[3]"},
      {"{\"multi\": \"first line\\nsecond line\\n\"}", yaml_dump_options::flow::leaves,
       "{multi: 'first line\n\n    second line\n\n    '}"},
      {"{\"1\": \"a\", \"\": \"empty key\"}", yaml_dump_options::flow::leaves,
       "{'': empty key, '1': a}"},
      // Random documents (a generator of keys and strings that need quoting,
      // folding, escapes), as Salt's safe_dump printed them.
      {"{\">\": [], \" lead\": [[[-5, \":\"], \"---\", {\"\": \"@a\", \"|\": \"1\", \"`b\": "
       "\"\xf0\x9f\x98\x80"
       "\", \"a #b\": \"long long long long long long long long long long long long long long long "
       "long long long long long \", \"x y\": 3.0}, \"0.5\"], [[1000000000000000000]], {\"\": "
       "{\"~\": \"&a\", \"@a\": 1.5, \":\": 0, \"{y}\": \"#c\", \"\xc3\xa9"
       "\": -0.0}, \"line\\n\": {}, \"q\\\"uote\": \"a\", \"...\": [\"key: v\"]}, true], \"`b\": "
       "-5}",
       yaml_dump_options::flow::always,
       "{' lead': [[[-5, ':'], '---', {'': '@a', '`b': \"\\U0001F600\", 'a #b': 'long long long\n  "
       "        long long long long long long long long long long long long long long long\n       "
       "   long long ', x y: 3.0, '|': '1'}, '0.5'], [[1000000000000000000]], {'': {\n        ':': "
       "0, '@a': 1.5, '{y}': '#c', '~': '&a', \xc3\xa9"
       ": -0.0}, '...': ['key: v'], ? 'line\n\n        ' : {}, q\"uote: a}, true], '>': [], '`b': "
       "-5}"},
      {"{\"[x]\": [{\"a\\nb\": "
       "{\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
       "xx\": null, \"?\": \">\"}}, null], \"a\": [], \"0x1F\": [{\"x y\": null, \" lead\": [], "
       "\"0644\": [0, false, \"\xc2\x85"
       "\", false, true], \"%p\": {\"key: v\": \"%p\"}, \"2001-12-14\": {\"*a\": \"&a\", \"a\": "
       "0.1}}, [{\"true\": \"...\", \" \": true, \">\": 3.0, \"?\": 1.5}]], \"a,b\": null}",
       yaml_dump_options::flow::always,
       "{'0x1F': [{' lead': [], '%p': {'key: v': '%p'}, '0644': [0, false, \"\\N\", false, "
       "true],\n      '2001-12-14': {'*a': '&a', a: 0.1}, x y: null}, [{' ': true, '>': 3.0, '?': "
       "1.5,\n        'true': '...'}]], '[x]': [{? 'a\n\n        b' : {'?': '>', "
       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx:"
       " null}},\n    null], a: [], 'a,b': null}"},
      {"{\"k3\": null, \"%p\": 1, \"key: v\": {}, \"---\": [{\"a\\n\\nb\": {}, \"http://x.y/z\": "
       "[\"\"], \"...\": false, \"\xc3\xa9"
       "\": [], \"~\": [-0.0, \"\xf0\x9f\x98\x80"
       "\"]}, 1.5e-07, \"{y}\", {\"k1\": {\"a #b\": -5, \"k3\": 123456789012}, \"1\": {\"a\\nb\": "
       "\"0644\", \"x y\": 1, \"trail \": \">\"}, \"#c\": -0.0, \"\\ttab\": {\"0x1F\": true, "
       "\"`b\": \"\\\\\", \"http://x.y/z\": \"a\", \"x y\": 1e+20}, \"k3\": true}]}",
       yaml_dump_options::flow::always,
       "{'%p': 1, '---': [{'...': false, ? 'a\n\n\n        b' : {}, 'http://x.y/z': [''], '~': "
       "[-0.0, \"\\U0001F600\"], \xc3\xa9"
       ": []}, 1.5e-07,\n    '{y}', {\"\\ttab\": {'0x1F': true, '`b': \\, 'http://x.y/z': a, x y: "
       "1.0e+20}, '#c': -0.0,\n      '1': {? 'a\n\n          b' : '0644', 'trail ': '>', x y: 1}, "
       "k1: {'a #b': -5, k3: 123456789012},\n      k3: true}], k3: null, 'key: v': {}}"},
      {"{\"2001-12-14\": {\"wordwordword "
       "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww\": \"\\\\\", "
       "\"k3\": {}, \"yes\": \"*a\", \"0x1F\": {\"%p\": [\"---\", \"No\", \"a\"], \"---\": "
       "\"it's\"}}, \"line\\n\": [[\"it's\", [false, 0, \"~\"], {\"a #b\": false, \"\xe2\x80\xa8"
       "\": \"it's\", \":\": \"&a\", \"\xc3\xbc"
       " \xc3\xb6"
       "\": \"a #b\"}, \" \"], null, [], [], {\"trail \": [], \"k4\": 0.1}]}",
       yaml_dump_options::flow::always,
       "{'2001-12-14': {'0x1F': {'%p': ['---', 'No', a], '---': it's}, k3: {}, wordwordword "
       "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww: \\,\n    'yes': "
       "'*a'}, ? 'line\n\n    ' : [[it's, [false, 0, '~'], {':': '&a', 'a #b': false, \xc3\xbc"
       " \xc3\xb6"
       ": 'a #b', ? '\xe2\x80\xa8"
       "          ' : it's}, ' '], null, [], [], {k4: 0.1, 'trail ': []}]}"},
      {"[[{\"---\": [\":\", -0.0, true], \"|\": [\"1e3\", 1.5e-07, \"\xe2\x80\xa8"
       "\", \"&a\", 0]}], [{\"k2\": \"No\", \"---\": 123456789012, \"2001-12-14\": \"0644\"}, "
       "[{\"%p\": true, \"a\\n\\nb\": null}], false, [{\"[x]\": \" lead\", \"it's\": false, \"a "
       "#b\": \"null\"}, \"a #b\", [123456789012, \"a\", \"wordwordword "
       "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww\"]]], -5]",
       yaml_dump_options::flow::never,
       "- - '---':\n    - ':'\n    - -0.0\n    - true\n    '|':\n    - 1e3\n    - 1.5e-07\n    - "
       "'\xe2\x80\xa8"
       "      '\n    - '&a'\n    - 0\n- - '---': 123456789012\n    '2001-12-14': '0644'\n    k2: "
       "'No'\n  - - '%p': true\n      ? 'a\n\n\n        b'\n      : null\n  - false\n  - - '[x]': "
       "' lead'\n      'a #b': 'null'\n      it's: false\n    - 'a #b'\n    - - 123456789012\n     "
       " - a\n      - wordwordword "
       "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww\n- -5"},
      {"[{\"{y}\": {}, \"a\": [{\"No\": \"null\", \"\xc3\xa9"
       "\": -0.0}], \"~\": false, \">\": 1.5, \" \": [[\"No\"], \">\", {\"\xe2\x80\xa8"
       "\": \"---\"}, 0, 0.1]}, [\"@a\", \"a:b\", 123456789012], {\"0x1F\": \"long long long long "
       "long long long long long long long long long long long long long long long long \", "
       "\"`b\": {\"it's\": 1e+20, \"a:b\": 1, \"a\": \"x y\"}, \"\xe2\x80\xa8"
       "\": \"line\\n\", \"{y}\": {\"a\": \"\xc2\x85"
       "\"}, \"k4\": \"line\\n\"}, {\"- a\": \"#c\"}, {}]",
       yaml_dump_options::flow::never,
       "- ' ':\n  - - 'No'\n  - '>'\n  - ? '\xe2\x80\xa8"
       "      '\n    : '---'\n  - 0\n  - 0.1\n  '>': 1.5\n  a:\n  - 'No': 'null'\n    \xc3\xa9"
       ": -0.0\n  '{y}': {}\n  '~': false\n- - '@a'\n  - a:b\n  - 123456789012\n- '0x1F': 'long "
       "long long long long long long long long long long long long long long\n    long long long "
       "long long '\n  '`b':\n    a: x y\n    a:b: 1\n    it's: 1.0e+20\n  k4: 'line\n\n    '\n  "
       "'{y}':\n    a: \"\\N\"\n  ? '\xe2\x80\xa8"
       "    '\n  : 'line\n\n    '\n- '- a': '#c'\n- {}"},
      {"{\"~\": -5, \"a \\nb\": -5, \"|\": null, \"---\": {\"key: v\": -5, \"k3\": \"a \\nb\", "
       "\"\xc2\x85"
       "\": [0.1]}, \"0x1F\": {\"%p\": [null, "
       "{\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
       "xx\": \"\xc3\xa9"
       "\", \"|\": \"*a\"}, [\"http://x.y/z\", 3.0, \"\\ttab\", \"a:b\", 3.0], [\"*a\", null, "
       "\"it's\"], [\"\", 0.1, \"1e3\"]], \"a #b\": [\"1\", 0, false], \"1e3\": \"#c\", "
       "\"\xf0\x9f\x98\x80"
       "\": 1.5e-07}}",
       yaml_dump_options::flow::never,
       "'---':\n  k3: \"a \\nb\"\n  'key: v': -5\n  ? \"\\N\"\n  : - 0.1\n'0x1F':\n  '%p':\n  - "
       "null\n  - "
       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx:"
       " \xc3\xa9"
       "\n    '|': '*a'\n  - - http://x.y/z\n    - 3.0\n    - \"\\ttab\"\n    - a:b\n    - 3.0\n  "
       "- - '*a'\n    - null\n    - it's\n  - - ''\n    - 0.1\n    - 1e3\n  1e3: '#c'\n  'a #b':\n "
       " - '1'\n  - 0\n  - false\n  \"\\U0001F600\": 1.5e-07\n? \"a \\nb\"\n: -5\n'|': null\n'~': "
       "-5"},
      {"{\"[x]\": [[[\"it's\", \"key: v\", true, \"\xf0\x9f\x98\x80"
       "\", \"0644\"], \"0x1F\"], {\"\\ttab\": [\":\", \"{y}\"], \"k0\": \"{y}\", \"?\": "
       "1000000000000000000, \"k2\": 123456789012}, {\"1e3\": 1000000000000000000}, \"a\\nb\"], "
       "\"k4\": \"0.5\", \"k0\": {\"k4\": [1.5, []], \"{y}\": [\"&a\", \"it's\", [\"%p\", "
       "\"line\\n\"], \"trail \", {\"0.5\": 1e+20, \"it's\": \"yes\", \"line\\n\": \"@a\", \"trail "
       "\": \">\"}]}}",
       yaml_dump_options::flow::never,
       "'[x]':\n- - - it's\n    - 'key: v'\n    - true\n    - \"\\U0001F600\"\n    - '0644'\n  - "
       "'0x1F'\n- \"\\ttab\":\n  - ':'\n  - '{y}'\n  '?': 1000000000000000000\n  k0: '{y}'\n  k2: "
       "123456789012\n- 1e3: 1000000000000000000\n- 'a\n\n  b'\nk0:\n  k4:\n  - 1.5\n  - []\n  "
       "'{y}':\n  - '&a'\n  - it's\n  - - '%p'\n    - 'line\n\n      '\n  - 'trail '\n  - '0.5': "
       "1.0e+20\n    it's: 'yes'\n    ? 'line\n\n      '\n    : '@a'\n    'trail ': '>'\nk4: "
       "'0.5'"},
      {"[\"&a\", [], \"true\", {\"long long long long long long long long long long long long long "
       "long long long long long long long \": {\"0.5\": -0.0, \">\": true, \"long long long long "
       "long long long long long long long long long long long long long long long long \": "
       "[\"wordwordword wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww\", "
       "\"*a\", \"\", false], \"- a\": \"\xc3\xbc"
       " \xc3\xb6"
       "\"}}]",
       yaml_dump_options::flow::leaves,
       "- '&a'\n- []\n- 'true'\n- 'long long long long long long long long long long long long "
       "long long long long long long long long ':\n    '- a': \xc3\xbc"
       " \xc3\xb6"
       "\n    '0.5': -0.0\n    '>': true\n    'long long long long long long long long long long "
       "long long long long long long long long long long ': [\n      wordwordword "
       "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww,\n      '*a', '', "
       "false]"},
      {"{\"wordwordword wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww\": "
       "{}, \"\xc3\xa9"
       "\": {\"2001-12-14\": {\"a\": \">\"}, \"!t\": [{\"\xc3\xbc"
       " \xc3\xb6"
       "\": 3.0, \"k3\": \"{y}\"}], \"?\": \"1e3\", \"a \\nb\": false, \"@a\": {\"trail \": "
       "\"null\", \"- a\": [null, "
       "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
       "x\", 0, \"{y}\"], \"http://x.y/z\": \"\\ttab\"}}, \"\xe2\x80\xa8"
       "\": [[[]]]}",
       yaml_dump_options::flow::leaves,
       "wordwordword wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww: "
       "{}\n\xc3\xa9"
       ":\n  '!t':\n  - {k3: '{y}', \xc3\xbc"
       " \xc3\xb6"
       ": 3.0}\n  '2001-12-14': {a: '>'}\n  '?': 1e3\n  '@a':\n    '- a': [null, "
       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx,"
       "\n      0, '{y}']\n    http://x.y/z: \"\\ttab\"\n    'trail ': 'null'\n  ? \"a \\nb\"\n  : "
       "false\n? '\xe2\x80\xa8"
       "  '\n: - - []"},
      {"{\"\xc3\xbc"
       " \xc3\xb6"
       "\": [1e+20, \"1\"], \"1\": \"#c\", \"null\": {\"- a\": {}, \"[x]\": {\"&a\": "
       "\"wordwordword wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww\", "
       "\"!t\": \"No\"}}, \"k4\": \"a #b\", \"key: v\": {\"a\\n\\nb\": \">\", \"\": {\" lead\": "
       "[\"http://x.y/z\", 0.1], \"0x1F\": \" lead\", \"!t\": {\"0644\": false, \"\": false}}, "
       "\"key: v\": {\"1\": 1e+20, \"No\": \">\"}, \"k0\": \"[x]\"}}",
       yaml_dump_options::flow::leaves,
       "'1': '#c'\nk4: 'a #b'\n'key: v':\n  '':\n    ' lead': ['http://x.y/z', 0.1]\n    '!t': "
       "{'': false, '0644': false}\n    '0x1F': ' lead'\n  ? 'a\n\n\n    b'\n  : '>'\n  k0: "
       "'[x]'\n  'key: v': {'1': 1.0e+20, 'No': '>'}\n'null':\n  '- a': {}\n  '[x]': {'!t': 'No', "
       "'&a': wordwordword "
       "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww}\n\xc3\xbc"
       " \xc3\xb6"
       ": [1.0e+20, '1']"},
      {"[{\"...\": true, \"%p\": {\"http://x.y/z\": \"\xc3\xa9"
       "\", \"0x1F\": 1000000000000000000, \"~\": \"~\", \"\xc3\xbc"
       " \xc3\xb6"
       "\": [3.0, \" \", 0, null, \"`b\"], \"...\": \"trail \"}, \"|\": [\"a #b\"], \"k3\": {}, "
       "\"\xc3\xbc"
       " \xc3\xb6"
       "\": {\"|\": {\"2001-12-14\": \"...\", \"yes\": 1.5e-07, \"x y\": true, \"\\\\\": 0}, "
       "\"null\": {\"%p\": \" lead\", \"line\\n\": \"line\\n\", \"0.5\": \"- a\", \"- a\": 1.5}}}, "
       "\"`b\", \"{y}\", []]",
       yaml_dump_options::flow::leaves,
       "- '%p':\n    '...': 'trail '\n    '0x1F': 1000000000000000000\n    http://x.y/z: \xc3\xa9"
       "\n    '~': '~'\n    \xc3\xbc"
       " \xc3\xb6"
       ": [3.0, ' ', 0, null, '`b']\n  '...': true\n  k3: {}\n  '|': ['a #b']\n  \xc3\xbc"
       " \xc3\xb6"
       ":\n    'null': {'%p': ' lead', '- a': 1.5, '0.5': '- a', ? 'line\n\n        ' : 'line\n\n  "
       "      '}\n    '|': {'2001-12-14': '...', \\: 0, x y: true, 'yes': 1.5e-07}\n- '`b'\n- "
       "'{y}'\n- []"},
  };
  for (const auto& r : rows) {
    yaml_dump_options o;
    o.flow_style = r.flow;
    value v = value::from_json(nlohmann::ordered_json::parse(r.json));
    EXPECT_EQ(dump_yaml(v, o), r.yaml) << r.json << " flow " << static_cast<int>(r.flow);
  }
}

// The same list or dict reached twice is written once with an anchor, as
// PyYAML's serializer does (and a list that holds itself ends).
TEST(DumpYaml, SharedCollectionsGetAnchors) {
  value l = value::make_list({value(1), value(2)});
  value d = value::make_dict();
  d.dict().set(value("k"), value(1));
  value top = value::make_dict();
  top.dict().set(value("a"), l);
  top.dict().set(value("b"), l);
  top.dict().set(value("c"), value::make_list({d, d}));
  top.dict().set(value("e"), d);
  EXPECT_EQ(dump_yaml(top), "{a: &id001 [1, 2], b: *id001, c: [&id002 {k: 1}, *id002], e: *id002}");
  value two = value::make_dict();
  two.dict().set(value("a"), l);
  two.dict().set(value("b"), l);
  yaml_dump_options block;
  block.flow_style = yaml_dump_options::flow::never;
  EXPECT_EQ(dump_yaml(two, block), "a: &id001\n- 1\n- 2\nb: *id001");
  value self = value::make_list({value(1)});
  self.items().push_back(self);
  EXPECT_EQ(dump_yaml(self), "&id001 [1, *id001]");
  EXPECT_EQ(dump_yaml(self, block), "&id001\n- 1\n- *id001");
  self.items().clear();  // no cycle collector: break it by hand
  value t = value::make_tuple({value(1), value(2)});
  value e = value::make_list();
  yaml_dump_options leaves;
  leaves.flow_style = yaml_dump_options::flow::leaves;
  EXPECT_EQ(dump_yaml(value::make_list({t, t}), leaves), "- &id001 [1, 2]\n- *id001");
  EXPECT_EQ(dump_yaml(value::make_list({e, e}), leaves), "- &id001 []\n- *id001");
}

TEST(DumpYaml, OptionsTuplesAndCallables) {
  value v = value::from_json(nlohmann::ordered_json::parse(R"({"b": 1, "a": [1, 2]})"));
  yaml_dump_options o;
  o.sort_keys = false;
  EXPECT_EQ(dump_yaml(v, o), "{b: 1, a: [1, 2]}");
  o.strip = false;
  o.flow_style = yaml_dump_options::flow::never;
  EXPECT_EQ(dump_yaml(v, o), "b: 1\na:\n- 1\n- 2\n");
  EXPECT_EQ(dump_yaml(value("x"), o), "x\n");
  // A tuple is a sequence; what YAML cannot represent (a callable) is NULL,
  // Salt's SafeOrderedDumper's fallback representer.
  EXPECT_EQ(dump_yaml(value::make_tuple({value(1)})), "[1]");
  EXPECT_EQ(dump_yaml(value::make_callable("f", [](call_args&) { return value(); })), "NULL");
  EXPECT_THROW(dump_yaml(value::undefined("'x' is undefined")), template_error);
}

// Salt's SafeOrderedDumper (the yaml filter) writes an OrderedDict (what its
// YAML renderer makes of an sls or pillar mapping) in its own order and
// sorts a plain dict; its serializers' Dumper (slsutil.serialize) sorts both.
TEST(DumpYaml, OrderedDictsKeepTheirOrderInSaltsSafeDump) {
  value inner = value::from_json(nlohmann::ordered_json::parse(R"({"z": 1, "a": 2})"));
  inner.dict().ordered_dict = true;
  value top = value::make_dict();
  top.dict().set(value("y"), inner);
  top.dict().set(value("b"), value(0));
  yaml_dump_options o;
  EXPECT_EQ(dump_yaml(top, o), "{b: 0, y: {a: 2, z: 1}}");
  o.ordered_dicts_in_order = true;
  EXPECT_EQ(dump_yaml(top, o), "{b: 0, y: {z: 1, a: 2}}");
}

}  // namespace
}  // namespace brine::render
