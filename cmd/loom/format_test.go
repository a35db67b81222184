package main

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// jsonToYAML keeps the key order and the JSON types: strings that would
// read back as something else stay quoted.
func TestJSONToYAML(t *testing.T) {
	in := `{"z": "true", "a": "3", "n": 3, "f": 1.5, "b": false, "e": {}, "l": [], "s": ["x", null], "@type": "t"}`
	out, err := jsonToYAML([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := "z: \"true\"\na: \"3\"\nn: 3\nf: 1.5\nb: false\ne: {}\nl: []\ns:\n  - x\n  - null\n'@type': t\n"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	var back map[string]any
	if err := yaml.Unmarshal(out, &back); err != nil || back["z"] != "true" || back["a"] != "3" || back["n"] != 3 {
		t.Errorf("read back %v, %v", back, err)
	}
}
