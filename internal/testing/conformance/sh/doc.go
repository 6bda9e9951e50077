// Command sh is the /bin/sh of the conformance suite's busybox stand-in
// image: busybox's ash, except that `sh -c CMD` of one simple command
// (words only, no shell syntax) executes CMD itself, as shells do for
// the last command of -c. Debian's busybox ash keeps only the
// environment variables whose names are shell identifiers and hands its
// children those alone; executing the command directly hands it the
// whole environment, as the e2e image's busybox does for the envFrom
// tests' `sh -c env` (names such as data-1 and 1-data-1). Everything else
// runs in ash, with ash's own messages ("/bin/sh: can't create …").
package main
