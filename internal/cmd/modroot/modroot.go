// Package modroot finds the repository's root for the project's
// generators and build helpers (internal/cmd/...), which run from
// anywhere inside it.
package modroot

import (
	"errors"
	"os"
	"path/filepath"
)

// Find walks up from the working directory to the directory that holds
// go.mod.
func Find() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("no go.mod above the working directory: run from the repository")
		}
		d = parent
	}
}
