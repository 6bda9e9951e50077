package engine

// LockSpec takes the spec lock of pod namespace/name as Apply does, for
// tests that hold it while other applies run.
func (n *Node) LockSpec(namespace, name string) (unlock func()) {
	return n.specs.lock(namespace, name)
}
