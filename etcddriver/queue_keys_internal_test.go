package etcddriver

import "testing"

// queueName reads back what lenPrefixed wrote, whatever bytes the name
// holds, and refuses keys it did not write.
func TestQueueNameInvertsLenPrefixed(t *testing.T) {
	for _, name := range []string{"a", "a/b", "", "7/x/", "ünï"} {
		got, err := queueName(lenPrefixed(name) + waiterPart + "id")
		if err != nil || got != name {
			t.Errorf("queueName(lenPrefixed(%q)...) = %q, %v", name, got, err)
		}
	}
	for _, bad := range []string{"", "abc", "x/abc", "-1/a", "9/short"} {
		if got, err := queueName(bad); err == nil {
			t.Errorf("queueName(%q) = %q, want an error", bad, got)
		}
	}
}
