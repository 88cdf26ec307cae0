// Package versionpolicy decides whether a newly pushed image tag should
// replace the deployed one under an application's upgrade track.
//
// The tracks and the tag formats follow KubeCD's "upgrade triggers":
//
//   - Versions are tags of the form X, X.Y or X.Y.Z, optionally prefixed
//     with "v" (v1, v1.2, v1.2.3). A missing minor or patch is 0, so "1.2"
//     and "v1.2.0" are the same version. Anything else, pre-releases such as
//     1.3.0-rc.1 included, is not a version the semantic tracks recognise and
//     is rejected by them with a reason.
//   - PatchLevel accepts a newer version with the same major.minor
//     (5.7.14 -> 5.7.15, not 5.8.0).
//   - MinorVersion accepts a newer version with the same major.
//   - MajorVersion accepts any newer version.
//   - Newest follows "the newest (as in most recently created) tag", not the
//     highest version: flotilla decides on a registry push, so the pushed tag
//     is the most recently created one and is accepted whatever it looks like
//     (v20170911-0926, 1.3.0-rc.1, or even a lower version than the current),
//     as long as it is a valid tag different from the current one. That is
//     how Newest differs from MajorVersion, which only ever moves forward along
//     semantic versions.
//
// Decide compares tags only. A tag re-pushed with new content (same tag, new
// digest) is a digest change for the caller to detect, not a tag decision.
package versionpolicy
