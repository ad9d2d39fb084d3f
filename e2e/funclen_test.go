package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// funcLinesMax is the most lines a function of the program's core may
// span: one a reader takes in at once, its steps named.
const funcLinesMax = 60

// TestFunctionLength: no function of cmd/, internal/run/, runner/ or
// lease/ (test files aside) spans more than funcLinesMax lines, from its
// func keyword to its closing brace. Text in raw string literals (SQL statements) counts as
// one line each: it is read as the statement it is, not as steps.
func TestFunctionLength(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	for _, root := range []string{"cmd", "internal/run", "runner", "lease"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				if n := funcLines(fset, fd); n > funcLinesMax {
					t.Errorf("%s: %s spans %d lines (at most %d): split it into named steps", fset.Position(fd.Pos()), fd.Name.Name, n, funcLinesMax)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// funcLines counts the lines fd spans, less the lines past the first of
// each raw string literal in it.
func funcLines(fset *token.FileSet, fd *ast.FuncDecl) int {
	line := func(p token.Pos) int { return fset.Position(p).Line }
	n := line(fd.End()) - line(fd.Pos()) + 1
	ast.Inspect(fd.Body, func(node ast.Node) bool {
		if lit, ok := node.(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.HasPrefix(lit.Value, "`") {
			n -= line(lit.End()) - line(lit.Pos())
		}
		return true
	})
	return n
}
