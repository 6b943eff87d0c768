// swift-tools-version:6.0
import PackageDescription

// Tern: the C engine (CTern) and, on top of it, the Swift API and the `tern` CLI.
let package = Package(
    name: "Tern",
    products: [
        .library(name: "CTern", targets: ["CTern"]),
    ],
    targets: [
        .target(
            name: "CTern",
            path: "CSources",
            publicHeadersPath: "include",
            cSettings: [
                .define("_DEFAULT_SOURCE"),
            ],
            linkerSettings: [
                .linkedLibrary("uv"),
                .linkedLibrary("pthread"),
            ]
        ),
    ],
    cLanguageStandard: .c11
)
