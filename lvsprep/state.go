package lvsprep

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// DefaultStateDir is where state files live. /run is right for them: it is
// emptied at boot, exactly like every setting lvsprep makes (sysctls,
// addresses, routes, rules and modules do not survive a reboot either), so
// a state file never describes changes that are gone.
const DefaultStateDir = "/run/lvsprep"

// State is a state file: the journal of an applied profile. It is rewritten
// after every step, so after a crash midway --undo still finds everything
// that was changed.
type State struct {
	Profile string    `json:"profile"`
	Args    []string  `json:"args"`
	Applied time.Time `json:"applied"`
	Records []Record  `json:"records"`
}

func statePath(dir, key string) string { return filepath.Join(dir, key+".json") }

// loadState reads a state file; it returns nil, nil when there is none.
func loadState(dir, key string) (*State, error) {
	b, err := os.ReadFile(statePath(dir, key))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("reading state %s: %w", statePath(dir, key), err)
	}
	return &st, nil
}

// saveState writes the state file atomically (a partial file would lose the
// record of changes).
func saveState(dir, key string, st *State) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+key+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), statePath(dir, key))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing state: %w", err)
	}
	return nil
}

func removeState(dir, key string) error {
	if err := os.Remove(statePath(dir, key)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing state: %w", err)
	}
	return nil
}

// stateKeys lists the keys of the state files in dir, sorted.
func stateKeys(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading state directory: %w", err)
	}
	var keys []string
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			keys = append(keys, strings.TrimSuffix(n, ".json"))
		}
	}
	slices.Sort(keys)
	return keys, nil
}
