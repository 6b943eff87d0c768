"""The response check every client module applies (one definition, so all check alike)."""


class BodyError(Exception):
    pass


def check_body(status, got, content_length):
    """Raises unless a 200 whose body length matches its Content-Length."""
    if status != 200:
        raise BodyError("status %s" % status)
    if content_length is None or int(content_length) != got:
        raise BodyError("body of %d bytes, Content-Length %s" % (got, content_length))
    return got
