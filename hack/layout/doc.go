// Command layout checks the layout docs/architecture.md describes,
// counted with the Go AST: engine.Node's fields and methods, that no type
// holds a *Node back-pointer, the size of the engine's root package, that
// the server reaches the engine through its facade alone (no import of
// engine/store, engine/syncer or engine/plan), a doc.go in every package,
// no large file tracked outside testdata/, and no per-RPC forwarding
// service. make check-deps runs it; it exits 1 when a limit is exceeded.
//
//	go run ./hack/layout [-dir CHECKOUT]
package main
