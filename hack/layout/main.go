package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The limits docs/architecture.md states for the layout.
const (
	maxNodeFields      = 15
	maxNodeMethods     = 40
	maxEngineRootLines = 2500
	maxTrackedBytes    = 1 << 20
)

// serverForbidden are the engine packages the server may not import: it
// reaches the node through its facade (engine) and the role interfaces it
// declares.
var serverForbidden = []string{"engine/store", "engine/syncer", "engine/plan"}

const module = "github.com/podsync/podsync"

func main() {
	dir := flag.String("dir", ".", "the checkout to measure")
	flag.Parse()
	c := &checker{dir: *dir}
	c.node()
	c.backPointers()
	c.engineRoot()
	c.serverImports()
	c.docs()
	c.tracked()
	c.files()
	if c.failed {
		os.Exit(1)
	}
}

type checker struct {
	dir    string
	failed bool
}

func (c *checker) report(ok bool, format string, args ...any) {
	mark := "ok  "
	if !ok {
		mark = "FAIL"
		c.failed = true
	}
	_, _ = fmt.Fprintf(os.Stdout, "%s %s\n", mark, fmt.Sprintf(format, args...))
}

// parseDir parses the non-test Go files of one directory.
func (c *checker) parseDir(rel string) (*token.FileSet, []*ast.File, []string) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(filepath.Join(c.dir, rel))
	if err != nil {
		fmt.Fprintln(os.Stderr, "layout:", err)
		os.Exit(2)
	}
	var files []*ast.File
	var names []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		path := filepath.Join(c.dir, rel, e.Name())
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err == nil {
			f, err = parser.ParseFile(fset, path, nil, 0)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "layout:", err)
			os.Exit(2)
		}
		files = append(files, f)
		names = append(names, path)
	}
	return fset, files, names
}

// node counts the fields and methods of engine.Node.
func (c *checker) node() {
	_, files, _ := c.parseDir("engine")
	fields, methods := -1, 0
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || ts.Name.Name != "Node" {
						continue
					}
					if st, ok := ts.Type.(*ast.StructType); ok {
						fields = 0
						for _, fl := range st.Fields.List {
							fields += max(len(fl.Names), 1)
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) == 1 && receiverName(d.Recv.List[0].Type) == "Node" {
					methods++
				}
			}
		}
	}
	c.report(fields >= 0 && fields <= maxNodeFields, "engine.Node has %d fields (at most %d)", fields, maxNodeFields)
	c.report(methods <= maxNodeMethods, "engine.Node has %d methods (at most %d)", methods, maxNodeMethods)
}

func receiverName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// backPointers finds struct fields of type *Node (in the engine's root
// package) or *engine.Node (anywhere under engine/).
func (c *checker) backPointers() {
	var found []string
	_ = filepath.WalkDir(filepath.Join(c.dir, "engine"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(c.dir, path)
		fset, files, _ := c.parseDir(rel)
		root := rel == "engine"
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				st, ok := n.(*ast.StructType)
				if !ok {
					return true
				}
				for _, fl := range st.Fields.List {
					if isNodePointer(fl.Type, root) {
						found = append(found, fset.Position(fl.Pos()).String())
					}
				}
				return true
			})
		}
		return nil
	})
	c.report(len(found) == 0, "no field of type *Node in any other type%s", list(found))
}

func isNodePointer(e ast.Expr, root bool) bool {
	s, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	switch x := s.X.(type) {
	case *ast.Ident:
		return root && x.Name == "Node"
	case *ast.SelectorExpr:
		pkg, ok := x.X.(*ast.Ident)
		return ok && pkg.Name == "engine" && x.Sel.Name == "Node"
	}
	return false
}

// engineRoot counts the lines of the engine's root package.
func (c *checker) engineRoot() {
	_, _, names := c.parseDir("engine")
	total := 0
	for _, n := range names {
		total += lines(n)
	}
	c.report(total <= maxEngineRootLines, "the engine's root package has %d non-test lines in %d files (at most %d)", total, len(names), maxEngineRootLines)
}

func lines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\n"))
}

// serverImports lists the server's imports of the engine's rooms: its
// code may import none of serverForbidden; its tests, which stage stored
// pods and events below the door, are listed.
func (c *checker) serverImports() {
	fset := token.NewFileSet()
	entries, _ := os.ReadDir(filepath.Join(c.dir, "server"))
	var bad, tests []string
	engines := map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(c.dir, "server", e.Name()), nil, parser.ImportsOnly)
		if err != nil {
			continue
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(p, module+"/engine") && !strings.HasSuffix(e.Name(), "_test.go") {
				engines[strings.TrimPrefix(p, module+"/")] = true
			}
			for _, f := range serverForbidden {
				switch {
				case p != module+"/"+f:
				case strings.HasSuffix(e.Name(), "_test.go"):
					tests = append(tests, e.Name()+": "+f)
				default:
					bad = append(bad, e.Name()+": "+f)
				}
			}
		}
	}
	var pkgs []string
	for p := range engines {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	c.report(len(bad) == 0, "server/ imports no %s (it imports %s)%s", strings.Join(serverForbidden, ", "), strings.Join(pkgs, ", "), list(bad))
	_, _ = fmt.Fprintf(os.Stdout, "info server/ tests that stage the store below the door: %d%s\n", len(tests), list(tests))
}

// docs finds packages without a doc.go; api/ is generated (buf generate
// cleans its directory), and documented by the protos.
func (c *checker) docs() {
	var missing []string
	cmd := exec.Command("go", "list", "-tags", "integration", "-f", "{{.Dir}}", "./...")
	cmd.Dir = c.dir
	out, err := cmd.Output()
	if err != nil {
		c.report(false, "go list: %v", err)
		return
	}
	abs, _ := filepath.Abs(c.dir)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		d := sc.Text()
		rel, _ := filepath.Rel(abs, d)
		if rel == "api" || strings.HasPrefix(rel, "api/") {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "doc.go")); err != nil {
			missing = append(missing, rel)
		}
	}
	c.report(len(missing) == 0, "every package but the generated api/ has a doc.go%s", list(missing))
}

// tracked finds files git tracks of more than maxTrackedBytes outside
// testdata/.
func (c *checker) tracked() {
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = c.dir
	out, err := cmd.Output()
	if err != nil {
		c.report(false, "git ls-files: %v", err)
		return
	}
	var big []string
	for _, p := range strings.Split(string(out), "\x00") {
		if p == "" || strings.Contains("/"+p, "/testdata/") {
			continue
		}
		if fi, err := os.Stat(filepath.Join(c.dir, p)); err == nil && fi.Size() > maxTrackedBytes {
			big = append(big, fmt.Sprintf("%s (%d bytes)", p, fi.Size()))
		}
	}
	c.report(len(big) == 0, "git tracks no file over %d bytes outside testdata/%s", maxTrackedBytes, list(big))
}

// files finds files that must not come back.
func (c *checker) files() {
	var found []string
	_ = filepath.WalkDir(c.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != c.dir {
			return filepath.SkipDir
		}
		if d.Name() == "lateservice.go" {
			found = append(found, path)
		}
		return nil
	})
	c.report(len(found) == 0, "no per-RPC forwarding service (lateservice.go): the server's readiness interceptors gate every call%s", list(found))
}

func list(items []string) string {
	if len(items) == 0 {
		return ""
	}
	return ":\n       " + strings.Join(items, "\n       ")
}
