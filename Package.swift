// swift-tools-version:6.0
import PackageDescription

// Every Swift target builds in the Swift 6 language mode (set package-wide below), which
// means complete strict-concurrency checking. Imports are internal unless marked `public`,
// so no C type (CTern is imported internally) can leak into the public API.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// How the release builds of the executables (the `tern` CLI here, the tern-swift benchmark driver
// in bench/Package.swift) are linked on Linux, for a smaller resident footprint (issue 19;
// linker/README.md has the measurements). Executables only: a library target with unsafe flags
// could not be used as a versioned dependency, and how a program is linked is its own choice.
//   - lld with packed relative relocations (DT_RELR): the binary stays position-independent, but
//     its ~38,000 relative relocations take 7 KiB instead of 900 KiB that the loader reads;
//   - -L linker/static: linker scripts that turn -lssl, -lcrypto, -luv, -lnghttp2, -lz,
//     -lbrotlidec, -lzstd and the Swift runtime's -lstdc++ into their static archives, so that
//     only the code used is mapped, without each shared library's symbol tables and relocated
//     data (libcrypto alone: 1.45 MiB resident);
//   - no -export-dynamic (the static Swift runtime's link arguments ask for it): nothing looks
//     the executable's symbols up at run time, and its symbol table was 350 KiB resident;
//   - linker/order.txt first in .text: the functions these programs run (scripts/make-link-order.sh
//     records them), so that the 64 KiB the kernel maps around each first touch of the code are
//     mostly code that runs.
let executableLinkerSettings: [LinkerSetting] = [
    .unsafeFlags(
        [
            "-use-ld=lld",
            "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
            "-L", Context.packageDirectory + "/linker/static",
            "-Xlinker", "--no-export-dynamic",
            "-Xlinker", "--symbol-ordering-file=" + Context.packageDirectory + "/linker/order.txt",
            "-Xlinker", "--no-warn-symbol-ordering",
        ],
        .when(platforms: [.linux], configuration: .release)
    ),
]

// Tern: the C engine (CTern) and, on top of it, the Swift API and the `tern` CLI.
let package = Package(
    name: "Tern",
    products: [
        .library(name: "CTern", targets: ["CTern"]),
        .library(name: "Tern", targets: ["Tern"]),
        // InputStream request bodies, for programs that link full Foundation anyway; Tern
        // itself needs only FoundationEssentials (no ICU, about 7 MiB less resident memory).
        .library(name: "TernFoundation", targets: ["TernFoundation"]),
        // swift-openapi-runtime's ClientTransport on Tern, for clients made by
        // swift-openapi-generator. Its own product, so that only programs that use it depend
        // on OpenAPIRuntime: the Tern product does not.
        .library(name: "TernOpenAPI", targets: ["TernOpenAPI"]),
        .executable(name: "tern", targets: ["tern"]),
        // Evaluates proxy auto-config scripts in a process of its own (docs/pac.md).
        .executable(name: "tern-pac", targets: ["tern-pac"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
    ],
    targets: [
        .target(
            name: "CTern",
            path: "CSources",
            publicHeadersPath: "include",
            cSettings: [
                .define("_DEFAULT_SOURCE"),
                // br and zstd response decoding (scripts/setup.sh installs libbrotli-dev and
                // libzstd-dev; the CMake build detects them instead).
                .define("TERN_HAVE_BROTLI"),
                .define("TERN_HAVE_ZSTD"),
            ],
            linkerSettings: [
                .linkedLibrary("uv"),
                .linkedLibrary("ssl"),
                .linkedLibrary("crypto"),
                .linkedLibrary("z"),
                .linkedLibrary("nghttp2"),
                .linkedLibrary("brotlidec"),
                .linkedLibrary("zstd"),
                .linkedLibrary("pthread"),
            ]
        ),
        // Debian's libduktape (duktape-dev), for tern-pac only.
        .systemLibrary(
            name: "CDuktape",
            path: "Sources/CDuktape",
            pkgConfig: "duktape",
            providers: [.apt(["duktape-dev"])]
        ),
        // The PAC evaluator: a C program talking a line protocol on stdin and stdout, so that
        // a script that never returns can be stopped by killing the process (docs/pac.md).
        .executableTarget(
            name: "tern-pac",
            dependencies: ["CDuktape"],
            path: "Sources/tern-pac",
            linkerSettings: [.linkedLibrary("m")]
        ),
        .target(
            name: "Tern",
            dependencies: [
                "CTern",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/Tern",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TernFoundation",
            dependencies: ["Tern"],
            path: "Sources/TernFoundation",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TernOpenAPI",
            dependencies: [
                "Tern",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/TernOpenAPI",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "tern",
            dependencies: [
                "Tern",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/tern",
            swiftSettings: swiftSettings,
            linkerSettings: executableLinkerSettings
        ),
        // Stores cache entries in a loop for the tests that SIGKILL it or run two at once on
        // one folder (Tests/TernTests/CacheStoreTests.swift). Not a product.
        .executableTarget(
            name: "tern-cache-torture",
            dependencies: [
                "Tern",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/tern-cache-torture",
            swiftSettings: swiftSettings
        ),
        // One signed upload or download in a process of its own, for the tests that measure its
        // memory or SIGKILL it (Tests/TernTests/FileTransferTests.swift). Not a product.
        .executableTarget(
            name: "tern-file-transfer-run",
            dependencies: ["Tern"],
            path: "Sources/tern-file-transfer-run",
            swiftSettings: swiftSettings
        ),
        // Runs the `tern` binary as a process, and also imports its module for unit tests of
        // the flag parsing and output formatting.
        .testTarget(
            name: "TernTests",
            dependencies: [
                "Tern",
                "TernFoundation",
                "CTern",
                "tern",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/TernTests",
            swiftSettings: swiftSettings
        ),
        // The transport under a client generated from openapi.yaml (the generated code is
        // committed in Generated/; the generator is not a dependency: see Generated/README.md).
        .testTarget(
            name: "TernOpenAPITests",
            dependencies: [
                "Tern",
                "TernOpenAPI",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Tests/TernOpenAPITests",
            exclude: ["openapi.yaml", "openapi-generator-config.yaml", "Generated/README.md"],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6],
    cLanguageStandard: .c11
)
