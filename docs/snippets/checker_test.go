package snippets

import (
	"strings"
	"testing"
)

// The rules at the top of snippets_test.go, on blocks made for the purpose:
// each block compiles or fails as the rules say, and a failure is reported
// at the Markdown line of the mistake.
func TestCheckerFollowsTheRules(t *testing.T) {
	ck := newChecker(t)
	cases := []struct {
		name string
		md   string
		want string // "" to compile; else a substring of the first error, at file:line
	}{
		{"fragment with elisions", "```go\n" +
			"lease, err := locker.Lock(ctx, \"order:42\")\n" +
			"if err != nil { ... }\n" +
			"defer lease.Unlock(context.Background())\n" +
			"r, err := locker.RWMutex(\"catalog\").RLock(ctx) // unused: fine in a fragment\n" +
			"```\n", ""},
		{"declarations at file scope, a body ending in an elision", "```go\n" +
			"func credit(ctx context.Context, locker *dlock.Client, account string) error {\n" +
			"\tlease, err := locker.Lock(ctx, account)\n" +
			"\tif err != nil {\n" +
			"\t\treturn err\n" +
			"\t}\n" +
			"\tdefer lease.Unlock(ctx)\n" +
			"\t...\n" +
			"}\n" +
			"\n" +
			"type account struct{ id string }\n" +
			"\n" +
			"err := credit(ctx, locker, account{\"7\"}.id)\n" +
			"```\n", ""},
		{"wrong number of results", "text\n\n```go\n" +
			"p, err := once.New(locker, redisonce.New(rdb))\n" +
			"```\n", "x.md:4:28: multiple-value redisonce.New(rdb)"},
		{"unknown method", "```go\n" +
			"lease, err := locker.Lock(ctx, \"k\")\n" +
			"err = lease.Unlok(ctx)\n" +
			"```\n", "x.md:3:13: lease.Unlok undefined"},
		{"unknown name", "```go\n" +
			"err := proces(ctx, order, 1)\n" +
			"```\n", "x.md:2:8: undefined: proces"},
		{"redeclaration", "```go\n" +
			"err := publish(ctx)\n" +
			"err := publish(ctx)\n" +
			"```\n", "x.md:3:5: no new variables"},
		{"a signature is not Go", "```go\n" +
			"Apply(ctx context.Context, resource string) error\n" +
			"```\n", "x.md:2:"},
		{"elision inside an expression", "```go\n" +
			"opts := []dlock.Option{dlock.WithOwnerMeta(\"x\"), ...}\n" +
			"```\n", "x.md:2:"},
		{"whole file", "```go\n" +
			"// Command demo.\n" +
			"package main\n" +
			"\n" +
			"import (\n" +
			"\t\"github.com/dlockio/dlock\"\n" +
			"\t\"github.com/dlockio/dlock/memdriver\"\n" +
			")\n" +
			"\n" +
			"func main() {\n" +
			"\tc, err := dlock.New(memdriver.New())\n" +
			"\tif err != nil {\n" +
			"\t\tpanic(err)\n" +
			"\t}\n" +
			"\tdefer c.Close()\n" +
			"}\n" +
			"```\n", ""},
		{"whole file: no preamble", "```go\n" +
			"package main\n" +
			"\n" +
			"func main() { _ = locker }\n" +
			"```\n", "x.md:4:19: undefined: locker"},
		{"whole file: a missing import", "```go\n" +
			"package main\n" +
			"\n" +
			"func main() { _ = time.Second }\n" +
			"```\n", "x.md:4:19: undefined: time"},
		{"whole file: an unused variable", "```go\n" +
			"package main\n" +
			"\n" +
			"func main() { x := 1 }\n" +
			"```\n", "x.md:4:15: declared and not used: x"},
		{"indented fence, other blocks ignored", "- step\n\n" +
			"  ```sh\n  go test ./... && not go\n  ```\n\n" +
			"  ```\n  Apply(ctx) error\n  ```\n\n" +
			"  ```go\n  err := publish(ctx)\n  ```\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			blocks, err := extract("x.md", []byte(tc.md))
			if err != nil {
				t.Fatal(err)
			}
			var errs []string
			checked := 0
			for _, b := range blocks {
				if b.isGo() {
					checked++
					errs = append(errs, ck.check(b)...)
				}
			}
			if checked != 1 {
				t.Fatalf("%d Go blocks found, want 1", checked)
			}
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("does not compile:\n%s", strings.Join(errs, "\n"))
			case tc.want != "" && len(errs) == 0:
				t.Errorf("compiles; want an error %q", tc.want)
			case tc.want != "" && !strings.Contains(errs[0], tc.want):
				t.Errorf("first error %q; want one containing %q (all: %q)", errs[0], tc.want, errs)
			}
		})
	}
}

func TestExtractRefusesAnUnclosedFence(t *testing.T) {
	_, err := extract("x.md", []byte("text\n\n```go\nx := 1\n"))
	if err == nil || !strings.Contains(err.Error(), "x.md:3:") {
		t.Fatalf("extract = %v, want an error at x.md:3", err)
	}
}
