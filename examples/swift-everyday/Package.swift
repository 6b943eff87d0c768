// swift-tools-version:6.0
// The everyday tasks of Tern's README as a package of its own, the way an application uses Tern.
// scripts/test.sh builds it against this checkout and runs it against the test servers.
//
// Here Tern is the checkout two directories up. A package of yours names it by URL instead (see
// the README): .package(url: "https://github.com/ORG/tern", from: "0.5.0").
import PackageDescription

let package = Package(
    name: "swift-everyday",
    dependencies: [
        .package(name: "tern", path: "../.."),
    ],
    targets: [
        // A first program: one GET, its status and size, or the error in words.
        .executableTarget(name: "first", dependencies: [.product(name: "Tern", package: "tern")]),
        // JSON GET and POSTs, a download with progress, 200 concurrent GETs, a cancel, bad input.
        .executableTarget(name: "everyday", dependencies: [.product(name: "Tern", package: "tern")]),
        // Mesibo's signed file transfer: an upload and its signed download, checked.
        .executableTarget(
            name: "filetransfer", dependencies: [.product(name: "Tern", package: "tern")]),
    ],
    swiftLanguageModes: [.v6]
)
