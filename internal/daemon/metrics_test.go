package daemon

import (
	"runtime/debug"
	"testing"
)

// TestBuildInfoOf: Loom's version is the main module's when it is one of
// Loom's, else the dependency's (its replacement's when replaced); a build
// from a checkout says "(devel)"; the revision carries "-dirty".
func TestBuildInfoOf(t *testing.T) {
	stamped := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}
	dirty := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}
	for name, tc := range map[string]struct {
		bi   debug.BuildInfo
		want BuildInfo
	}{
		"loom's command, released": {debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "github.com/loomrt/loom/cmd/loom", Version: "v1.2.3"}, Settings: stamped},
			BuildInfo{"v1.2.3", "abc123", "go1.26.8"}},
		"a user's host depending on loom": {debug.BuildInfo{GoVersion: "go1.26.8",
			Main:     debug.Module{Path: "example.com/myhost", Version: "(devel)"},
			Deps:     []*debug.Module{{Path: "github.com/loomrt/loomish", Version: "v9.9.9"}, {Path: "github.com/loomrt/loom", Version: "v0.4.0"}},
			Settings: dirty},
			BuildInfo{"v0.4.0", "abc123-dirty", "go1.26.8"}},
		"loom replaced by a directory": {debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "example.com/myhost"},
			Deps: []*debug.Module{{Path: "github.com/loomrt/loom", Version: "v0.4.0", Replace: &debug.Module{Path: "../loom"}}}},
			BuildInfo{"(devel)", "unknown", "go1.26.8"}},
		"a checkout": {debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "github.com/loomrt/loom", Version: "(devel)"}},
			BuildInfo{"(devel)", "unknown", "go1.26.8"}},
	} {
		if got := buildInfoOf(&tc.bi); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", name, got, tc.want)
		}
	}
}
