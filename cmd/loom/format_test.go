package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/proto/pbresource"
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

// Data that cannot be printed as its type, unknown or not decoding as the
// type the server describes, is printed as its type URL and base64 bytes,
// with one warning per type.
func TestPrintUnresolvableData(t *testing.T) {
	types := &typeResolver{ctx: context.Background(), noServer: errors.New("no reflection here")}
	var stdout, stderr bytes.Buffer
	p := &printer{format: formatJSON, types: types, stdout: &stdout, stderr: &stderr, now: time.Now, warned: map[string]bool{}}
	list := []*pbresource.Resource{
		{Id: &pbresource.ID{Name: "unknown"}, Data: &anypb.Any{TypeUrl: "type.googleapis.com/no.such.Type", Value: []byte{1, 2, 3}}},
		{Id: &pbresource.ID{Name: "again"}, Data: &anypb.Any{TypeUrl: "type.googleapis.com/no.such.Type", Value: []byte{4}}},
		// A Tombstone is known; these bytes are not one (field 1, a
		// message, cut short).
		{Id: &pbresource.ID{Name: "garbled"}, Data: &anypb.Any{TypeUrl: "type.googleapis.com/hashicorp.consul.resource.Tombstone", Value: []byte{0x0a, 0x05, 0x01}}},
	}
	if err := p.printResources(list, false); err != nil {
		t.Fatalf("printing: %v", err)
	}
	for _, want := range []string{`"@value": "AQID"`, `"@value": "BA=="`, `"@value": "CgUB"`} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("printed\n%s\nwithout %s", stdout.String(), want)
		}
	}
	if n := strings.Count(stderr.String(), "warning: data printed as base64"); n != 2 {
		t.Errorf("%d warnings, want one per type:\n%s", n, stderr.String())
	}
}
