package host

import (
	"flag"
	"time"

	"github.com/loomrt/loom/storage"
	loometcd "github.com/loomrt/loom/storage/etcd"
	"github.com/loomrt/loom/storage/inmem"
)

// historyFlags are the bounds of the history and trash the storage keeps
// (storage.HistoryLimits), which the history service (server/history)
// serves.
type historyFlags struct {
	versions  int
	retention time.Duration
	perType   int
}

func (f *historyFlags) register(fs *flag.FlagSet) {
	d := storage.DefaultHistoryLimits
	fs.IntVar(&f.versions, "history-versions", d.KeepVersions,
		"how many past versions of each resource the history keeps (changes of data or metadata; status writes are not versions); 0 keeps no history and no trash")
	fs.DurationVar(&f.retention, "trash-retention", d.TrashRetention,
		"how long a deleted resource is kept in the trash, from which it can be restored")
	fs.IntVar(&f.perType, "trash-per-type", d.TrashPerType,
		"most deleted resources of one type kept in the trash (the oldest deletions go first)")
}

// check checks the flags' values.
func (f historyFlags) check() error {
	if f.versions < 0 {
		return usagef("-history-versions must not be negative (0 turns history off)")
	}
	if f.retention <= 0 || f.perType <= 0 {
		return usagef("-trash-retention and -trash-per-type must be positive")
	}
	return nil
}

// limits returns the bounds the flags give, and false when history is off.
func (f historyFlags) limits() (storage.HistoryLimits, bool) {
	return storage.HistoryLimits{KeepVersions: f.versions, TrashRetention: f.retention, TrashPerType: f.perType}, f.versions > 0
}

// inmemOption is the in-memory backend's option for the flags.
func (f historyFlags) inmemOption() inmem.Option {
	if limits, on := f.limits(); on {
		return inmem.WithHistory(limits)
	}
	return inmem.WithoutHistory()
}

// etcdOption is the etcd backend's option for the flags.
func (f historyFlags) etcdOption() loometcd.Option {
	if limits, on := f.limits(); on {
		return loometcd.WithHistory(limits)
	}
	return loometcd.WithoutHistory()
}
