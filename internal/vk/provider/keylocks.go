package provider

import "sync"

// keyLocks are mutexes by key (a pod's namespace/name: its notifications,
// its debug containers' adds), each kept only while it is held or
// waited for. The zero value is ready to use.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	sync.Mutex
	users int // holders and waiters
}

// lock locks k's mutex and returns its unlock.
func (l *keyLocks) lock(k string) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*keyLock{}
	}
	e := l.m[k]
	if e == nil {
		e = &keyLock{}
		l.m[k] = e
	}
	e.users++
	l.mu.Unlock()
	e.Lock()
	return func() {
		e.Unlock()
		l.mu.Lock()
		if e.users--; e.users == 0 {
			delete(l.m, k)
		}
		l.mu.Unlock()
	}
}
