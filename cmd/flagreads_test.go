package cmd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// flagReads are the methods of *cli.Context that read a flag by its name
// as a string (and IsSet, which asks by name whether one was given).
var flagReads = map[string]bool{
	"String": true, "StringSlice": true, "Int": true, "Int64": true, "IntSlice": true, "Int64Slice": true,
	"Uint": true, "Uint64": true, "Float64": true, "Float64Slice": true, "Bool": true, "Duration": true,
	"Generic": true, "Value": true, "Timestamp": true, "Path": true, "IsSet": true,
}

// No code of cmd (tests aside) reads a flag by its name: every flag is
// bound to a field of options (Destination), and "was it given" is
// options.isGiven of that field. A read by name is a fourth place a flag
// lives (besides its definition, its field and its golden help), and a
// typo in it fails only at run time.
func TestNoFlagReadByName(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		contexts := contextNames(f)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !flagReads[sel.Sel.Name] {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && contexts[id.Name] {
				t.Errorf("%s: %s.%s reads a flag by its name; bind the flag to a field of options (Destination) and read the field", fset.Position(call.Pos()), id.Name, sel.Sel.Name)
			}
			return true
		})
	}
}

// contextNames are the names f gives a *cli.Context (parameters, variables).
func contextNames(f *ast.File) map[string]bool {
	names := map[string]bool{}
	isContext := func(e ast.Expr) bool {
		star, ok := e.(*ast.StarExpr)
		if !ok {
			return false
		}
		sel, ok := star.X.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "Context" && isIdent(sel.X, "cli")
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			if isContext(n.Type) {
				for _, id := range n.Names {
					names[id.Name] = true
				}
			}
		case *ast.ValueSpec:
			if n.Type != nil && isContext(n.Type) {
				for _, id := range n.Names {
					names[id.Name] = true
				}
			}
		}
		return true
	})
	return names
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
