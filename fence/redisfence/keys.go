package redisfence

import (
	"fmt"
	"strings"

	"github.com/dlockio/dlock"
)

// FenceKey returns the key that holds the high-water mark of data key key,
// in the same Redis Cluster slot (see the package documentation for the
// layout). It fails, matching dlock.ErrInvalidKey, for an empty key, for
// a key without a hash tag that contains '}', and for a key in the marks'
// own namespace (starting with "dlock:fence"): a data key there could be
// another key's mark, and a write to it would lower that mark.
func FenceKey(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty", dlock.ErrInvalidKey)
	}
	if strings.HasPrefix(key, markPrefix) {
		return "", fmt.Errorf("%w: %q is in the namespace of the fence marks (%s…)", dlock.ErrInvalidKey, key, markPrefix)
	}
	if hasHashTag(key) {
		return markPrefix + ":" + key, nil
	}
	if strings.Contains(key, "}") {
		// "{" + key + "}" would end the tag at key's '}', not at ours.
		return "", fmt.Errorf("%w: %q has no hash tag but contains '}', so its mark cannot share its Cluster slot", dlock.ErrInvalidKey, key)
	}
	return markPrefix + "{" + key + "}", nil
}

// markPrefix begins every fence mark's key.
const markPrefix = "dlock:fence"

// hasHashTag reports whether Redis Cluster hashes key by a tag: the text
// between its first '{' and the first '}' after it, if not empty.
func hasHashTag(key string) bool {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return false
	}
	j := strings.IndexByte(key[i+1:], '}')
	return j > 0
}
