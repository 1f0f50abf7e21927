package dlock

// Version is the version of this module, following semantic versioning,
// without the tag's leading "v". Between releases it is the next release
// with a "-dev" suffix; scripts/release sets it to the released version in
// the release commit (see RELEASING.md). The dlock command reports it
// (dlock --version); a build can override the command's copy with
// -ldflags "-X main.version=...".
const Version = "0.1.0-dev"
