package syncer

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// resolveSubPath opens subPath within root as resolveMount does and
// returns the path of what it opened, for the tests of openSubPath.
func resolveSubPath(root, subPath string) (string, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer func() { _ = unix.Close(rfd) }()
	fd, err := openSubPath(rfd, subPath)
	if err != nil {
		return "", err
	}
	defer func() { _ = unix.Close(fd) }()
	return os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
}
