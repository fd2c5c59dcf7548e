"""The closeness rule of the reference suites: |actual - expected| <= atol * scale + rtol * |expected| elementwise,
scale = max(1, max|expected|). Layers and references both run in float64, so the tolerances sit near rounding; the
floor of 1 keeps a near-zero tensor (a gradient that is zero by an invariance) from demanding rounding-level precision
relative to itself."""
import torch

RTOL, ATOL = 1e-9, 1e-10  # float64 against float64 references


def float64_on_cpu(tensor):
    return tensor.detach().double().cpu()


def scale_of(expected):
    """max(1, max|expected|), as a float64 scalar tensor."""
    return float64_on_cpu(expected).abs().max().clamp_min(1.0)


def scaled_difference(actual, expected):
    """max|actual - expected| / max(1, max|expected|), computed in float64 on the CPU (NaN when either holds one)."""
    actual, expected = float64_on_cpu(actual), float64_on_cpu(expected)
    return ((actual - expected).abs().max() / scale_of(expected)).item()


def assert_close(test, actual, expected, what, rtol=RTOL, atol=ATOL):
    """Fails `test` (a unittest.TestCase) unless actual and expected have the same shape and dtype and meet the
    rule elementwise (a NaN fails); returns scaled_difference(actual, expected)."""
    test.assertEqual(actual.shape, expected.shape, f"{what}: shape")
    test.assertEqual(actual.dtype, expected.dtype, f"{what}: dtype")
    actual, expected = float64_on_cpu(actual), float64_on_cpu(expected)
    difference = (actual - expected).abs()
    scale = scale_of(expected)
    if not bool((difference <= atol * scale + rtol * expected.abs()).all()):
        test.fail(f"{what}: max |actual - expected| {difference.max().item():.3e} exceeds atol {atol} * scale "
                  f"{scale.item():.3e} + rtol {rtol} * |expected|")
    return (difference.max() / scale).item()
