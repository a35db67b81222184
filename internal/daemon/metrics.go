package daemon

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// loomModule is the module whose version a build reports.
const loomModule = "github.com/loomrt/loom"

// BuildInfo is what a binary says of its own build.
type BuildInfo struct {
	// Version is Loom's module version: the binary's own when its main
	// module is one of Loom's (cmd/loom), else the version of Loom it
	// depends on. "(devel)" for a build from a checkout or a go.work.
	Version string
	// Revision is the VCS revision the binary was built from (with
	// "-dirty" when the tree had changes), "unknown" when the build did
	// not stamp one (go build -buildvcs=false, go run, go test).
	Revision string
	// Go is the Go version that built the binary.
	Go string
}

// ReadBuildInfo returns the running binary's BuildInfo.
func ReadBuildInfo() BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return BuildInfo{Version: "(devel)", Revision: "unknown", Go: runtime.Version()}
	}
	return buildInfoOf(bi)
}

// buildInfoOf picks Loom's version and the revision out of bi.
func buildInfoOf(bi *debug.BuildInfo) BuildInfo {
	b := BuildInfo{Version: moduleVersion(bi), Revision: "unknown", Go: bi.GoVersion}
	if b.Go == "" {
		b.Go = runtime.Version()
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && b.Revision != "unknown" {
		b.Revision += "-dirty"
	}
	return b
}

func moduleVersion(bi *debug.BuildInfo) string {
	mod := &bi.Main
	if mod.Path != loomModule && !strings.HasPrefix(mod.Path, loomModule+"/") {
		mod = nil
		for _, d := range bi.Deps {
			if d.Path == loomModule {
				mod = d
				break
			}
		}
	}
	if mod != nil && mod.Replace != nil {
		mod = mod.Replace // a replacement by a directory has no version
	}
	if mod == nil || mod.Version == "" {
		return "(devel)"
	}
	return mod.Version
}

// BuildInfoCollector is the loom_build_info gauge: 1, labelled with b.
func BuildInfoCollector(b BuildInfo) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "loom_build_info",
		Help:        "1, labelled with Loom's module version, the VCS revision the binary was built from and the Go version.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "go": b.Go},
	})
	g.Set(1)
	return g
}

// LeaderCollector is the loom_leader gauge of a lease: 1 while held
// reports true (this process leads), 0 otherwise.
func LeaderCollector(lease string, held func() bool) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "loom_leader",
		Help:        "1 while this process holds the leader lease named by the label (and runs the singleton controllers), 0 otherwise.",
		ConstLabels: prometheus.Labels{"lease": lease},
	}, func() float64 {
		if held() {
			return 1
		}
		return 0
	})
}
