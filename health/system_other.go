//go:build !unix

package health

import "errors"

func statOwner(string) (FileInfo, error) {
	return FileInfo{}, errors.New("file owners: not on this system")
}
