package funchost

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ehmirror/ehmirror/functions"
)

// Defaults of the WebJobs SDK's SingletonOptions (azure-webjobs-sdk
// src/Microsoft.Azure.WebJobs.Host/Singleton/SingletonOptions.cs).
const (
	// DefaultListenerLockPeriod is ListenerLockPeriod: the lease a timer
	// listener holds, renewed while it runs.
	DefaultListenerLockPeriod = 60 * time.Second
	// DefaultListenerLockPoll is ListenerLockRecoveryPollingInterval: how
	// often an instance without the lock tries to take it.
	DefaultListenerLockPoll = time.Minute
)

// Storage stands in for AzureWebJobsStorage, which every instance of a
// function app shares: a timer listener's singleton lock (a blob lease,
// BlobLeaseDistributedLockManager; here a lease file) and its schedule
// monitor's status (a blob; here a JSON file). Hosts given the same
// Storage behave as instances of one app: only the holder of a timer's
// lock runs its schedule (SingletonListener, [Singleton(Mode =
// SingletonMode.Listener)] on TimerListener); the others try again every
// LockPoll, and the one that takes the lock over starts from the shared
// status, past due when an occurrence was missed.
type Storage struct {
	// Dir holds the lease and status files; it must exist.
	Dir string
	// LockPeriod is the lease's duration (0: DefaultListenerLockPeriod);
	// the holder renews it every half period.
	LockPeriod time.Duration
	// LockPoll is how often a host without the lock tries to take it (0:
	// DefaultListenerLockPoll).
	LockPoll time.Duration

	mu sync.Mutex // between the hosts of this process
}

func (s *Storage) lockPeriod() time.Duration {
	if s.LockPeriod > 0 {
		return s.LockPeriod
	}
	return DefaultListenerLockPeriod
}

func (s *Storage) lockPoll() time.Duration {
	if s.LockPoll > 0 {
		return s.LockPoll
	}
	return DefaultListenerLockPoll
}

// lease is a lease file's content.
type lease struct {
	Owner   string    `json:"owner"`
	Expires time.Time `json:"expires"`
}

// lease takes (or, for its owner, renews) the timer's lock until now +
// LockPeriod; it reports false when another owner holds an unexpired one.
func (s *Storage) lease(function, owner string) (bool, error) {
	return s.update(function, func(l *lease, now time.Time) bool {
		if l.Owner != "" && l.Owner != owner && now.Before(l.Expires) {
			return false
		}
		l.Owner, l.Expires = owner, now.Add(s.lockPeriod())
		return true
	})
}

// release gives the lock up if owner holds it.
func (s *Storage) release(function, owner string) error {
	_, err := s.update(function, func(l *lease, now time.Time) bool {
		if l.Owner != owner {
			return false
		}
		*l = lease{}
		return true
	})
	return err
}

// update applies change to the timer's lease file atomically; change
// reports whether to write the lease back.
func (s *Storage) update(function string, change func(*lease, time.Time) bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(s.Dir, function+".lease"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return false, fmt.Errorf("funchost: lease of %s: %w", function, err)
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return false, fmt.Errorf("funchost: lease of %s: lock: %w", function, err)
	}
	defer unlockFile(f)
	var l lease
	raw, err := io.ReadAll(f)
	if err != nil {
		return false, fmt.Errorf("funchost: lease of %s: read: %w", function, err)
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &l); err != nil {
			return false, fmt.Errorf("funchost: lease of %s: %w", function, err)
		}
	}
	if !change(&l, time.Now()) {
		return false, nil
	}
	raw, _ = json.Marshal(l)
	if err := f.Truncate(0); err != nil {
		return false, fmt.Errorf("funchost: lease of %s: write: %w", function, err)
	}
	if _, err := f.WriteAt(raw, 0); err != nil {
		return false, fmt.Errorf("funchost: lease of %s: write: %w", function, err)
	}
	return true, nil
}

// readStatus returns the timer's shared schedule status, or nil when none
// was recorded.
func (s *Storage) readStatus(function string) (*functions.ScheduleStatus, error) {
	raw, err := os.ReadFile(filepath.Join(s.Dir, function+".status.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("funchost: status of %s: %w", function, err)
	}
	var st functions.ScheduleStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("funchost: status of %s: %w", function, err)
	}
	return &st, nil
}

// writeStatus records the timer's schedule status (ScheduleMonitor
// .UpdateStatusAsync), atomically.
func (s *Storage) writeStatus(function string, st functions.ScheduleStatus) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("funchost: status of %s: %w", function, err)
	}
	path := filepath.Join(s.Dir, function+".status.json")
	tmp, err := os.CreateTemp(s.Dir, function+".status-*")
	if err != nil {
		return fmt.Errorf("funchost: status of %s: %w", function, err)
	}
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("funchost: status of %s: %w", function, err)
	}
	tmp.Close()
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("funchost: status of %s: %w", function, err)
	}
	return nil
}
