// The modules whose types appear in Tern's public API, re-exported: `import Tern` alone
// gives HTTPFields, HTTPField.Name, HTTPRequest.Method and HTTPResponse.Status.

@_exported public import HTTPTypes
