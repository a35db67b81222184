package selector_test

import (
	"strings"
	"testing"

	"github.com/loomrt/loom/selector"
)

func TestParseMatches(t *testing.T) {
	md := map[string]string{"app": "web", "team": "payments", "empty": ""}
	cases := []struct {
		in        string
		canonical string
		match     bool
	}{
		{"", "", true},
		{"   ", "", true},
		{"app=web", "app=web", true},
		{"app==web", "app=web", true},
		{" app = web ", "app=web", true},
		{"app=db", "app=db", false},
		{"app!=db", "app!=db", true},
		{"app!=web", "app!=web", false},
		{"missing!=web", "missing!=web", true},
		{"app in (db, web)", "app in (db,web)", true},
		{"app in (web,db,web)", "app in (db,web)", true},
		{"app in (db)", "app in (db)", false},
		{"missing in (db)", "missing in (db)", false},
		{"app notin (db)", "app notin (db)", true},
		{"app notin (web)", "app notin (web)", false},
		{"missing notin (web)", "missing notin (web)", true},
		{"app", "app", true},
		{"missing", "missing", false},
		{"!missing", "!missing", true},
		{"! app", "!app", false},
		{"empty=", "empty=", true},
		{"empty", "empty", true},
		{"team=payments,app=web", "app=web,team=payments", true},
		{"team=payments,app=db", "app=db,team=payments", false},
		{"app in(web),!x,team", "app in (web),team,!x", true},
		{"example.com/tier=front", "example.com/tier=front", false},
	}
	for _, c := range cases {
		s, err := selector.Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := s.String(); got != c.canonical {
			t.Errorf("Parse(%q).String() = %q, want %q", c.in, got, c.canonical)
		}
		if got := s.Matches(md); got != c.match {
			t.Errorf("Parse(%q).Matches = %v, want %v", c.in, got, c.match)
		}
		if s.Empty() != (c.canonical == "") {
			t.Errorf("Parse(%q).Empty() = %v", c.in, s.Empty())
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"=b", "position 0: expected a key"},
		{"a=b,", "position 4: expected a key, found the end"},
		{"a=b c", "position 4: expected ',' or the end"},
		{"a b", "position 2: expected an operator"},
		{"a in x", "position 5: expected '('"},
		{"a in ()", "position 6: expected a value"},
		{"a in (x,)", "position 8: expected a value"},
		{"a in (x", "expected ',' or ')', found the end"},
		{"a=(b)", "position 2: expected a value"},
		{"a=b=c", "position 3: expected a value"},
		{"!", "position 1: expected a key"},
		{"finalizers", `"finalizers" is a reserved metadata key`},
		{"a=b,deletionTimestamp in (x)", `position 4: "deletionTimestamp" is a reserved metadata key`},
		{"!finalizers", `"finalizers" is a reserved`},
		{strings.Repeat("x", selector.MaxLength+1), "longer than the maximum of 4096"},
		{strings.Repeat("a,", selector.MaxRequirements) + "a", "more than 64 requirements"},
	}
	for _, c := range cases {
		_, err := selector.Parse(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%.20q) = %v, want an error containing %q", c.in, err, c.want)
		}
	}
}

// TestErrorQuotesBoundedInput checks an error repeats at most a bounded part
// of a long selector.
func TestErrorQuotesBoundedInput(t *testing.T) {
	in := "a=b " + strings.Repeat("y", 4000)
	_, err := selector.Parse(in)
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	if len(err.Error()) > 200 {
		t.Errorf("error is %d bytes long: %.100s", len(err.Error()), err)
	}
}

func TestEverything(t *testing.T) {
	s := selector.Everything()
	if !s.Empty() || !s.Matches(nil) || s.String() != "" {
		t.Errorf("Everything() = %q, Empty %v", s, s.Empty())
	}
	var zero selector.Selector
	if !zero.Matches(map[string]string{"a": "b"}) {
		t.Error("the zero Selector does not match")
	}
}

func TestRequirementsIsACopy(t *testing.T) {
	s := selector.MustParse("a in (x,y)")
	rs := s.Requirements()
	rs[0].Values[0] = "z"
	if s.String() != "a in (x,y)" {
		t.Errorf("changing Requirements changed the selector: %q", s)
	}
}

func TestMatchesAllocatesNothing(t *testing.T) {
	s := selector.MustParse("app in (db,web),team!=ops,!gone,tier,zone notin (a)")
	md := map[string]string{"app": "web", "team": "payments", "tier": "1"}
	if !s.Matches(md) {
		t.Fatal("no match")
	}
	if n := testing.AllocsPerRun(100, func() { s.Matches(md) }); n != 0 {
		t.Errorf("Matches allocates %v times", n)
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "a=b", "a==b", "a!=b", "a in (x,y)", "a notin (x)", "a", "!a",
		"a=b,c in (d, e),!f", "a in (,)", "x=", "finalizers", "a=(", "a in (x",
		"é=ü", "a\t=\tb", "in", "notin in (in)",
	} {
		f.Add(seed, "a", "b")
	}
	f.Fuzz(func(t *testing.T, in, key, value string) {
		s, err := selector.Parse(in)
		if err != nil {
			if len(err.Error()) > 700 { // two quotes of resource.MaxQuoted bytes, escaped
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		canon := s.String()
		again, err := selector.Parse(canon)
		if err != nil {
			t.Fatalf("Parse(String() = %q): %v", canon, err)
		}
		if again.String() != canon {
			t.Fatalf("String not stable: %q then %q", canon, again.String())
		}
		md := map[string]string{key: value}
		if s.Matches(md) != again.Matches(md) {
			t.Fatalf("%q and its canonical form %q disagree on %v", in, canon, md)
		}
	})
}
