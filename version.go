package dlock

// Version is the version of this module, following semantic versioning.
// The dlock command reports it (dlock --version); a build can override
// the command's copy with -ldflags "-X main.version=...".
const Version = "0.1.0"
