package resource_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

func TestQuote(t *testing.T) {
	assert.Equal(t, `"short"`, resource.Quote("short"))
	exact := strings.Repeat("a", resource.MaxQuoted)
	assert.Equal(t, `"`+exact+`"`, resource.Quote(exact))
	assert.Equal(t, exact, resource.Truncate(exact))

	long := strings.Repeat("b", 1_000_000)
	assert.Equal(t, `"`+strings.Repeat("b", resource.MaxQuoted)+`"…(1000000 bytes)`, resource.Quote(long))
	assert.Equal(t, strings.Repeat("b", resource.MaxQuoted)+"…(1000000 bytes)", resource.Truncate(long))

	// A cut never splits a character: "é" is two bytes, and byte 64 is the
	// second of one.
	accents := "x" + strings.Repeat("é", 100)
	got := resource.Truncate(accents)
	require.True(t, strings.HasSuffix(got, "…(201 bytes)"), got)
	assert.Equal(t, "x"+strings.Repeat("é", 31)+"…(201 bytes)", got)
	assert.Equal(t, `"x`+strings.Repeat("é", 31)+`"…(201 bytes)`, resource.Quote(accents))
}

// TestValidationErrorsAreShort checks that the validation errors of package
// resource do not repeat huge input.
func TestValidationErrorsAreShort(t *testing.T) {
	huge := strings.Repeat("x", 1_000_000)
	hugeUpper := "X" + huge
	cases := map[string]error{
		"name":          resource.ValidateName(huge),
		"invalid name":  resource.ValidateName(hugeUpper),
		"group":         resource.ValidateType(&pbresource.Type{Group: hugeUpper, GroupVersion: "v1", Kind: "Bar"}),
		"group version": resource.ValidateType(&pbresource.Type{Group: "foo", GroupVersion: hugeUpper, Kind: "Bar"}),
		"kind":          resource.ValidateType(&pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: huge}),
	}
	_, err := resource.NormalizeTenancy("tenancy", resource.ScopeCluster, &pbresource.Tenancy{Namespace: huge}, false)
	cases["absent unit"] = err
	_, err = resource.ParseType(huge)
	cases["parse type"] = err
	_, _, err = resource.ParseFence(huge + "@key")
	cases["fence"] = err
	for name, err := range cases {
		require.Error(t, err, name)
		assert.Less(t, len(err.Error()), 300, "%s: %s", name, err)
		assert.Regexp(t, `"X?x{63,64}"…\(100000[01] bytes\)`, err.Error(), name)
	}
}
