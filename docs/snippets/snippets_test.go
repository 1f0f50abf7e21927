// TestDocSnippets compiles every Go block of README.md and docs/*.md. The
// rules a block follows:
//
//  1. A fenced block whose info string is "go" (or "golang") is Go and is
//     type-checked; no other block is. Pseudo-code, signatures on their own,
//     shell sessions and output are fenced without "go" (``` or ```text).
//
//  2. A block whose first line that is neither blank nor a // comment starts
//     with "package " is a whole file. It is checked on its own, with its own
//     imports, and every error counts: an unused import or variable too.
//
//  3. Any other block is a fragment: statements, as in a function body. It
//     is checked inside a function placed after preamble.go, so a fragment
//     - names the packages preamble.go imports (context, sql, errors, fmt,
//     slog, http, time, dlock, election, etcddriver, fence, redisfence,
//     sqlfence, memdriver, once, redisonce, sqlonce, dlockotel, dlockprom,
//     redisdriver, zkdriver, prometheus, promhttp, redis) without importing
//     them;
//     - uses the names preamble.go declares without declaring them: ctx,
//     locker, rdb, db, url, guard; order, orderID, payload, job; process,
//     charge, markPaid, publish, lead, transfer, readCatalog, writeCatalog,
//     transcode (each with the type or signature given there). It may
//     declare its own of the same name (locker, err := redisdriver.Open(…));
//     - may declare functions and types: a line that starts in column 0 with
//     "func " or "type " begins a declaration at file scope, which runs to
//     the end of that declaration (its closing brace), and the lines after
//     it are statements again;
//     - may leave code out with "...": a "..." where a statement would begin
//     (on a line of its own, or `{ ... }`) stands for code that ends the
//     function, and is checked as panic(0). So `if err != nil { ... }`
//     compiles, and so does a function with results whose body ends in "...".
//     A variable a fragment declares and never uses is not an error (a
//     fragment shows calls; what they return is the reader's to use). Every
//     other error is: an unknown name, a wrong number of arguments or results,
//     a mismatched type, := that declares nothing new.
//
//  4. Errors are reported at the Markdown file and line they are on.
//
// The packages are type-checked from the export data that go list builds
// for this package's dependencies with the "snippets" build tag, that is for
// what preamble.go imports: a whole-file block may import only those (and
// the standard library packages they depend on), and a package a block
// needs is added to preamble.go's imports and its list of used names.

package snippets

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// markdown returns the Markdown files whose Go blocks are compiled, relative
// to the repository's root: README.md and docs/*.md.
func markdown(t *testing.T, root string) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "README.md")); err != nil {
		t.Fatalf("the repository's README.md: %v", err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(filepath.Join("docs", filepath.Base(d))))
	}
	return files
}

func TestDocSnippets(t *testing.T) {
	root := filepath.Join("..", "..")
	ck := newChecker(t)
	compiled := 0
	for _, name := range markdown(t, root) {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := extract(name, src)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, b := range blocks {
			if !b.isGo() {
				continue
			}
			compiled++
			t.Run(fmt.Sprintf("%s:%d", name, b.fence), func(t *testing.T) {
				for _, e := range ck.check(b) {
					t.Error(e)
				}
			})
		}
	}
	if compiled == 0 {
		t.Fatal("no Go blocks found in the repository's Markdown")
	}
	t.Logf("%d Go blocks compiled", compiled)
}

// A block is one fenced code block of a Markdown file.
type block struct {
	file  string // the Markdown file, as errors name it
	fence int    // line of the opening fence (1-based)
	info  string // the first word of the info string: "go", "sh", ""
	text  string // the content, without the fences' indentation
}

// isGo reports whether the block is tagged as Go.
func (b block) isGo() bool {
	return strings.EqualFold(b.info, "go") || strings.EqualFold(b.info, "golang")
}

// wholeFile reports whether the block is a complete Go file (rule 2).
func (b block) wholeFile() bool {
	sc := bufio.NewScanner(strings.NewReader(b.text))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "//") {
			continue
		}
		return strings.HasPrefix(l, "package ")
	}
	return false
}

// extract returns the fenced code blocks of a Markdown file: fences of three
// or more backticks or tildes, closed by a line of at least as many of the
// same character.
func extract(file string, src []byte) ([]block, error) {
	var (
		out    []block
		cur    *block
		fence  string
		indent int
		text   strings.Builder
	)
	lines := strings.Split(strings.ReplaceAll(string(src), "\r\n", "\n"), "\n")
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		if cur == nil {
			f := fenceOf(trimmed)
			if f == "" {
				continue
			}
			info := strings.Fields(trimmed[len(f):])
			cur = &block{file: file, fence: i + 1}
			if len(info) > 0 {
				cur.info = info[0]
			}
			fence, indent = f, len(line)-len(trimmed)
			text.Reset()
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(strings.TrimSpace(trimmed), fence[:1]) == "" {
			cur.text = text.String()
			out = append(out, *cur)
			cur = nil
			continue
		}
		// The content loses up to the opening fence's indentation.
		n := 0
		for n < indent && n < len(line) && line[n] == ' ' {
			n++
		}
		text.WriteString(line[n:])
		text.WriteByte('\n')
	}
	if cur != nil {
		return out, fmt.Errorf("%s:%d: code fence never closed", file, cur.fence)
	}
	return out, nil
}

// fenceOf returns the fence a line opens ("```", "~~~~"), or "".
func fenceOf(line string) string {
	if line == "" || (line[0] != '`' && line[0] != '~') {
		return ""
	}
	n := 0
	for n < len(line) && line[n] == line[0] {
		n++
	}
	if n < 3 || (line[0] == '`' && strings.Contains(line[n:], "`")) {
		return ""
	}
	return line[:n]
}

// A checker type-checks blocks against the export data of the packages
// preamble.go imports.
type checker struct {
	fset     *token.FileSet
	imp      types.Importer
	preamble string
}

func newChecker(t *testing.T) *checker {
	t.Helper()
	exports := exportData(t)
	preamble, err := os.ReadFile("preamble.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("%q is not imported by preamble.go (nor by a package it imports)", path)
		}
		return os.Open(f)
	})
	return &checker{fset: fset, imp: imp, preamble: string(preamble)}
}

// exportData returns the export data file of every package preamble.go
// depends on, by import path, built by go list with this test's settings
// (the environment's GOFLAGS and GOWORK; -race when the test has it).
func exportData(t *testing.T) map[string]string {
	t.Helper()
	args := []string{"list", "-tags", "snippets", "-deps", "-export",
		"-f", "{{if .Export}}{{.ImportPath}}\t{{.Export}}{{end}}"}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(t.Context(), "go", append(args, ".")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	m := make(map[string]string)
	for line := range strings.Lines(string(out)) {
		if path, file, ok := strings.Cut(strings.TrimSpace(line), "\t"); ok {
			m[path] = file
		}
	}
	return m
}

// check type-checks b and returns its errors, each as "file:line:col: msg".
func (c *checker) check(b block) []string {
	name, src, whole := "snippet.go", lineDirective(b.file, b.fence+1)+b.text, b.wholeFile()
	if !whole {
		name, src = "preamble.go", c.fragment(b)
	}
	f, err := parser.ParseFile(c.fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		var list scanner.ErrorList
		if errors.As(err, &list) {
			var out []string
			for _, e := range list {
				out = append(out, e.Error())
			}
			return out
		}
		return []string{err.Error()}
	}
	var out []string
	conf := types.Config{
		Importer: c.imp,
		Error: func(err error) {
			var te types.Error
			if errors.As(err, &te) {
				pos := c.fset.Position(te.Pos)
				if !whole && pos.Filename == b.file && strings.Contains(te.Msg, "declared and not used") {
					return // rule 3
				}
			}
			out = append(out, err.Error())
		},
	}
	_, _ = conf.Check("snippet", c.fset, []*ast.File{f}, nil)
	sort.Strings(out)
	return out
}

// lineDirective makes the line after it report as file:line.
func lineDirective(file string, line int) string {
	return fmt.Sprintf("//line %s:%d:1\n", file, line)
}

// fragment returns the source that checks a fragment (rule 3): preamble.go,
// then the fragment's declarations, then a function made of the rest.
func (c *checker) fragment(b block) string {
	text := elide(b.text)
	lines := strings.SplitAfter(text, "\n")
	decl := declLines(text, lines)
	var decls, body strings.Builder
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && decl[j] == decl[i] {
			j++
		}
		w := &body
		if decl[i] {
			w = &decls
		}
		w.WriteString(lineDirective(b.file, b.fence+1+i))
		for _, l := range lines[i:j] {
			w.WriteString(l)
		}
		if !strings.HasSuffix(lines[j-1], "\n") {
			w.WriteByte('\n')
		}
		i = j
	}
	p := c.preamble
	if !strings.HasSuffix(p, "\n") {
		p += "\n"
	}
	return p + decls.String() + "func _() {\n" + body.String() + "}\n"
}

// A tok is a token of a fragment and where it starts.
type tok struct {
	off  int
	line int
	tok  token.Token
}

// tokens scans src, comments skipped, automatic semicolons included.
func tokens(src string) []tok {
	fset := token.NewFileSet()
	file := fset.AddFile("", -1, len(src))
	var s scanner.Scanner
	s.Init(file, []byte(src), func(token.Position, string) {}, 0)
	var out []tok
	for {
		pos, t, _ := s.Scan()
		if t == token.EOF {
			return out
		}
		out = append(out, tok{off: file.Offset(pos), line: file.Line(pos), tok: t})
	}
}

// elide replaces each "..." that stands where a statement would begin and
// ends there (rule 3) with panic(0).
func elide(src string) string {
	ts := tokens(src)
	var b strings.Builder
	last := 0
	for i, t := range ts {
		if t.tok != token.ELLIPSIS {
			continue
		}
		begins := i == 0 || ts[i-1].tok == token.LBRACE || ts[i-1].tok == token.SEMICOLON ||
			ts[i-1].tok == token.COLON
		ends := i == len(ts)-1 || ts[i+1].tok == token.RBRACE || ts[i+1].tok == token.SEMICOLON ||
			ts[i+1].line > t.line
		if begins && ends {
			b.WriteString(src[last:t.off])
			b.WriteString("panic(0)")
			last = t.off + len("...")
		}
	}
	b.WriteString(src[last:])
	return b.String()
}

// declLines marks the lines of lines (the lines of src) that belong to a
// declaration at file scope: from a line starting with "func " or "type "
// to the semicolon, explicit or automatic, that ends the declaration.
func declLines(src string, lines []string) []bool {
	decl := make([]bool, len(lines))
	ts := tokens(src)
	off := 0
	for i, l := range lines {
		start := off
		off += len(l)
		if decl[i] || !(strings.HasPrefix(l, "func ") || strings.HasPrefix(l, "type ")) {
			continue
		}
		k := sort.Search(len(ts), func(k int) bool { return ts[k].off >= start })
		depth, end := 0, len(lines)
	scan:
		for ; k < len(ts); k++ {
			switch ts[k].tok {
			case token.LPAREN, token.LBRACE, token.LBRACK:
				depth++
			case token.RPAREN, token.RBRACE, token.RBRACK:
				depth--
			case token.SEMICOLON:
				if depth == 0 {
					end = ts[k].line // lines[end-1] is the declaration's last
					break scan
				}
			}
		}
		for j := i; j < end && j < len(lines); j++ {
			decl[j] = true
		}
	}
	return decl
}
