package host

import (
	"flag"

	"github.com/loomrt/loom/server/bulk"
)

// bulkFlags bound what one bulk import (server/bulk) may hold.
type bulkFlags struct {
	maxItems, maxBytes int
}

func (f *bulkFlags) register(fs *flag.FlagSet) {
	d := bulk.DefaultLimits
	fs.IntVar(&f.maxItems, "bulk-max-items", d.MaxItems,
		"most resources one bulk import (loom import, loom apply of many documents) may send; it is refused whole beyond")
	fs.IntVar(&f.maxBytes, "bulk-max-bytes", d.MaxBytes,
		"most bytes one bulk import may send; the server holds the whole import in memory while it checks it, one import at a time")
}

// check checks the flags' values.
func (f bulkFlags) check() error {
	if f.maxItems <= 0 || f.maxBytes <= 0 {
		return usagef("-bulk-max-items and -bulk-max-bytes must be positive")
	}
	return nil
}

// limits returns the bulk service's limits for the flags.
func (f bulkFlags) limits() bulk.Limits {
	l := bulk.DefaultLimits
	l.MaxItems, l.MaxBytes = f.maxItems, f.maxBytes
	return l
}
