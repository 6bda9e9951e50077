// Package security reproduces the attacks of issue 17 against an
// in-process podsyncd — the real server, engine, store and volume code on
// a fake CRI runtime — and shows each refused with a clear reason and
// nothing created. It runs in make test-unit; the rows that need mounts
// need root, as CI has.
package security
