#include "jinja/template.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"

namespace tandem::jinja {
namespace {

// Templates exercising each construct, with the text (or error) @huggingface/jinja 0.5.13
// gives for them (its output, pasted: the reference these expectations come from).
struct Case {
  const char* name;
  const char* source;
  const char* variables;  // JSON object
  const char* expected;   // the output, or the error message when !ok
  bool ok;
};

const Case kCases[] = {
    {"loop_variables",
     R"jinja({% for x in items %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}{{ '<' if loop.first }}{{ '>' if loop.last }}{{ loop.length }} {% endfor %})jinja",
     R"jinja({"items": ["a", "b", "c"]})jinja", R"jinja(1/0/3<3 2/1/23 3/2/1>3 )jinja", true},
    {"whitespace_control",
     R"jinja(<ul>
  {%- for x in items %}
    <li>{{ x }}</li>
  {%- endfor %}
</ul>
)jinja",
     R"jinja({"items": [1, 2]})jinja", R"jinja(<ul>    <li>1</li>    <li>2</li></ul>)jinja", true},
    {"trim_and_lstrip_blocks",
     R"jinja({% if true %}
    yes
{% endif %}
  {% if false %}no{% else %}
else
  {% endif %}
end
)jinja",
     R"jinja({})jinja",
     R"jinja(    yes
else
end)jinja",
     true},
    {"namespace",
     R"jinja({% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }})jinja",
     R"jinja({"messages": [{"role": "user"}, {"role": "assistant"}, {"role": "user"}]})jinja",
     R"jinja(true 2)jinja", true},
    {"for_scope",
     R"jinja({% set x = 1 %}{% for i in [1, 2] %}{% set x = i * 10 %}{{ x }},{% endfor %}{{ x }})jinja",
     R"jinja({})jinja", R"jinja(10,20,1)jinja", true},
    {"slices_and_reverse",
     R"jinja({{ items[1:] | join(',') }}|{{ items[::-1] | join(',') }}|{{ items[-2:] | join }}|{{ 'hello'[1:3] }}|{{ items[0] }}{{ items[-1] }})jinja",
     R"jinja({"items": ["a", "b", "c", "d"]})jinja", R"jinja(b,c,d|d,c,b,a|cd|el|ad)jinja", true},
    {"loop_filter_and_else",
     R"jinja({% for m in messages if m.role != 'system' %}{{ m.content }};{% else %}empty{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %})jinja",
     R"jinja({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]})jinja",
     R"jinja(u;|empty)jinja", true},
    {"string_methods",
     R"jinja({{ s.strip() }}|{{ s.split('</think>')[-1].lstrip() }}|{{ s.startswith(' <think>') }}|{{ 'a b  c'.split() | length }}|{{ s.upper() }})jinja",
     R"jinja({"s": " <think>r</think>\n\nanswer "})jinja",
     R"jinja(<think>r</think>

answer|answer |true|3| <THINK>R</THINK>

ANSWER )jinja",
     true},
    {"tests",
     R"jinja({{ x is defined }}{{ y is defined }}{{ none is none }}{{ x is string }}{{ n is number }}{{ x is not none }}{{ d is mapping }}{{ l is iterable }}{{ 3 is odd }})jinja",
     R"jinja({"x": "s", "n": 1.5, "d": {}, "l": []})jinja",
     R"jinja(truefalsetruetruetruetruetruetruetrue)jinja", true},
    {"tojson", R"jinja({{ d | tojson }}|{{ d.tools | tojson(indent=2) }}|{{ 'é"' | tojson }})jinja",
     R"jinja({"d": {"name": "f", "tools": [{"a": 1, "b": [true, null]}], "x": 1.5}})jinja",
     R"jinja({"name": "f", "tools": [{"a": 1, "b": [true, null]}], "x": 1.5}|[
  {
    "a": 1,
    "b": [
      true,
      null
    ]
  }
]|"é\"")jinja",
     true},
    {"items_and_dict_literal",
     R"jinja({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% set e = {'a': 1, 'b': [1, 2]} %}{{ e.b[1] }}{{ e['a'] }}{{ 'a' in e }})jinja",
     R"jinja({"d": {"z": 1, "y": "two"}})jinja", R"jinja(z=1;y=two;21true)jinja", true},
    {"arithmetic_and_ternary",
     R"jinja({{ 7 // 2 }} {{ 7 / 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ -3 + 1 }} {{ 1.5 * 2 }} {{ 'yes' if 0 else 'no' }} {{ 'a' ~ 1 ~ missing }})jinja",
     R"jinja({})jinja", R"jinja(3 3.5 1 1024 -2 3.0 no a1)jinja", true},
    {"break_continue",
     R"jinja({% for i in range(10) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %})jinja",
     R"jinja({})jinja", R"jinja(023)jinja", true},
    {"set_block_and_comment",
     R"jinja({% set greeting %}Hello {{ name }}{% endset %}{# a comment #}{{ greeting | upper }})jinja",
     R"jinja({"name": "Ann"})jinja", R"jinja(HELLO ANN)jinja", true},
    {"and_or_values",
     R"jinja({{ a or 'default' }}|{{ b and 'both' }}|{{ not a }}|{{ (messages | length) > 1 and messages[1].role == 'assistant' }})jinja",
     R"jinja({"a": "", "b": [1], "messages": [{"role": "user"}, {"role": "assistant"}]})jinja",
     R"jinja(default|both|true|true)jinja", true},
    {"selectattr_map",
     R"jinja({{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(' + ') }})jinja",
     R"jinja({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]})jinja",
     R"jinja(a + c)jinja", true},
    {"undefined_attributes",
     R"jinja([{{ missing }}][{{ missing.attr }}][{{ d.nope }}][{{ d['nope'] is defined }}])jinja",
     R"jinja({"d": {}})jinja", R"jinja([][][][false])jinja", true},
    {"printing_values",
     R"jinja({{ true }} {{ 1.0 }} {{ [1, 'a', none] }} {{ {'k': true} }} {{ none }})jinja",
     R"jinja({})jinja", R"jinja(true 1.0 [1, "a", null] {"k": true} )jinja", true},
    {"concat_none_is_an_error", R"jinja({{ 'a' ~ none }})jinja", R"jinja({})jinja",
     R"jinja(template render error: Cannot perform operation on null values)jinja", false},
    {"call_on_undefined_is_an_error", R"jinja({{ missing() }})jinja", R"jinja({})jinja",
     R"jinja(template render error: Cannot call something that is not a function: got UndefinedValue)jinja",
     false},
    {"raise_in_loop",
     R"jinja({% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system: ' ~ m.content) }}{% endif %}{% endfor %})jinja",
     R"jinja({"messages": [{"role": "system", "content": "s1"}]})jinja",
     R"jinja(no system: s1)jinja", false},
};

ValueDict Variables(const char* json) {
  const Value value = Value::FromJson(nlohmann::ordered_json::parse(json));
  return value.dict();
}

TEST(TemplateTest, RendersLikeTheReference) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Template> parsed = Template::Parse(c.source);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    absl::StatusOr<std::string> rendered = parsed->Render(Variables(c.variables));
    if (c.ok) {
      ASSERT_TRUE(rendered.ok()) << rendered.status();
      EXPECT_EQ(*rendered, c.expected);
    } else {
      EXPECT_EQ(rendered.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(rendered.status().message(), c.expected);
    }
  }
}

// Python Jinja keeps the text an iteration wrote before {% break %} / {% continue %};
// @huggingface/jinja 0.5.13 drops it ("0" and "0x2x" here). No supported template uses
// either; this engine follows Jinja.
TEST(TemplateTest, BreakAndContinueKeepTheIterationsText) {
  absl::StatusOr<Template> stop = Template::Parse(
      "{% for i in range(3) %}{{ i }}{% if i == 1 %}{% break %}{% endif %}{% endfor %}");
  ASSERT_TRUE(stop.ok());
  EXPECT_EQ(*stop->Render({}), "01");
  absl::StatusOr<Template> skip = Template::Parse(
      "{% for i in range(3) %}{{ i }}{% if i == 1 %}{% continue %}{% endif %}x{% endfor %}");
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ(*skip->Render({}), "0x12x");
}

TEST(TemplateTest, StrftimeNowUsesTheGivenClock) {
  absl::StatusOr<Template> parsed =
      Template::Parse("{{ strftime_now('%Y-%m-%d %H:%M %B %b %%') }}");
  ASSERT_TRUE(parsed.ok());
  setenv("TZ", "UTC", 1);
  RenderOptions options;
  options.clock = [] { return std::time_t{1733186096}; };  // 2024-12-03 00:34:56 UTC
  EXPECT_EQ(*parsed->Render({}, options), "2024-12-03 00:34 December Dec %");
}

TEST(TemplateTest, BoundsOutputAndWork) {
  absl::StatusOr<Template> big = Template::Parse(
      "{% for i in range(1000) %}{% for j in range(1000) %}xx{% endfor %}{% endfor %}");
  ASSERT_TRUE(big.ok());
  RenderOptions options;
  options.max_output_bytes = 1000;
  EXPECT_EQ(big->Render({}, options).status().message(),
            "template render error: rendered text longer than 1000 bytes");
  absl::StatusOr<Template> slow = Template::Parse(
      "{% for i in range(2000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(slow.ok());
  EXPECT_EQ(slow->Render({}).status().message(),
            "template render error: more than 250000 loop iterations");
}

TEST(TemplateTest, BoundsMemoryAndRejectsCycles) {
  const auto render_error = [](const char* source) {
    absl::StatusOr<Template> parsed = Template::Parse(source);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return parsed.ok() ? std::string(parsed->Render({}).status().message()) : "";
  };
  EXPECT_EQ(render_error("{% set x = 'ab' %}{% for i in range(40) %}{% set x = x ~ x %}"
                         "{% endfor %}"),
            "template render error: string longer than 16777216 bytes");
  EXPECT_EQ(render_error("{% set ns = namespace(l=[1]) %}{% for i in range(25) %}"
                         "{% set ns.l = ns.l + ns.l %}{% endfor %}"),
            "template render error: list longer than 1048576 items");
  EXPECT_EQ(render_error("{% set ns = namespace(a=1) %}{% set ns.me = [{'x': ns}] %}"),
            "template render error: cannot store a namespace inside itself (or a value nested "
            "over 100 deep)");
  EXPECT_EQ(render_error("{% set ns = namespace(l=[]) %}{% for i in range(200) %}"
                         "{% set ns.l = [ns.l] %}{% endfor %}"),
            "template render error: cannot store a namespace inside itself (or a value nested "
            "over 100 deep)");
  const std::string deep_list = "{{ " + std::string(150, '[') + "1" + std::string(150, ']') + " }}";
  EXPECT_EQ(render_error(deep_list.c_str()),
            "template render error: value nested too deeply to print");
}

TEST(TemplateTest, ParseErrors) {
  EXPECT_EQ(Template::Parse("{% include 'x' %}").status().message(),
            "template syntax error: unsupported statement '{% include %}'");
  EXPECT_EQ(Template::Parse("{{ a | }}").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Template::Parse("{{ 'unterminated }}").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TemplateTest, CopiesShareTheParsedProgram) {
  absl::StatusOr<Template> parsed = Template::Parse("{{ x }}");
  ASSERT_TRUE(parsed.ok());
  const Template copy = *parsed;
  ValueDict variables;
  variables.Set("x", Value::Int(5));
  EXPECT_EQ(*copy.Render(variables), "5");
}

}  // namespace
}  // namespace tandem::jinja
