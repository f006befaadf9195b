/// Whether an answer's `ETag` names the version that a kept one (the probe's, the journal's) names.
///
/// Equal tags do. So does a kept weak tag `W/"x"` beside a later strong `"x"` where both answers give
/// the same `Last-Modified`: Apache 2.4 words a file's `ETag` weak for the second after the file was
/// modified (it cannot yet tell two changes within that second apart) and strong from then on, the
/// same tag. Taken as a change, every download begun in that second and still running a second later
/// started over, and so did each resume of it. The reverse (strong, then weak) and any other tag
/// remain a change; so does the same pair without an equal `Last-Modified` to back it.
enum AgedETag {
    static func sameVersion(kept: String?, got: String?, keptModified: String?, gotModified: String?) -> Bool {
        if kept == got { return true }
        guard let kept, let got, let modified = keptModified, modified == gotModified,
            kept.hasPrefix("W/"), got.hasPrefix("\"")
        else { return false }
        return kept.utf8.dropFirst(2).elementsEqual(got.utf8)
    }
}
