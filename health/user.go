package health

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
)

// lookupUser returns name's uid and primary gid from the user database.
func lookupUser(name string) (uid, gid uint32, err error) {
	u, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		return 0, 0, errors.New("no such user")
	}
	if err != nil {
		return 0, 0, err
	}
	id, err1 := strconv.ParseUint(u.Uid, 10, 32)
	g, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("uid %q or gid %q is not a number", u.Uid, u.Gid)
	}
	return uint32(id), uint32(g), nil
}
