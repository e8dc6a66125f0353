"""Table 1's MAE-against-seconds plot: a PNG (matplotlib) and offline HTML (Bokeh)."""


def plot_table1(table, traces, path):
    """A PNG of the MAE against the true rates over wall-clock seconds for every run
    (lines: the current sample or ``E_q``; markers: the table's posterior means)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    colors = {}
    for name, trace in traces.groupby("trace", sort=False):
        trace = trace.sort_values("seconds")
        (line,) = axes.plot(
            trace["seconds"],
            trace["rate_mae"],
            lw=1.2,
            alpha=0.75,
            ls="--" if trace["kind"].iloc[0] == "vi" else "-",
            label=f"{name} (current state)",
        )
        colors[name] = line.get_color()
    markers = {"naive MCMC": "o", "private MCMC": "s", "naive VI": "^", "private VI": "D", "private MCMC, VI init": "P"}
    for _, row in table.iterrows():
        axes.plot(
            row["seconds"],
            row["mae"],
            markers.get(row["method"], "o"),
            ms=8,
            mec="black",
            color=colors.get(row["method"], "gray"),
        )
        axes.annotate(
            row["iterations"], (row["seconds"], row["mae"]), textcoords="offset points", xytext=(5, 5), fontsize=7
        )
    axes.set_xscale("log")
    axes.set_xlabel("wall-clock seconds (log scale)")
    axes.set_ylabel("MAE against the true rates")
    axes.set_title("VI paper, Table 1: MAE against time (markers: the table's rows)")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120, format="png")  # a path or a file handle (an atomic write's temporary)
    plt.close(figure)
    return path


def _plot_table1_html(summary, traces, path, title):
    """The MAE-against-seconds plot as offline HTML (Bokeh, resources inline)."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.palettes import Category10_10
    from bokeh.plotting import figure as bokeh_figure

    from lpviz.reproduce.report import _save_html

    plot = bokeh_figure(
        width=820,
        height=480,
        x_axis_type="log",
        title=title,
        x_axis_label="wall-clock seconds (log scale)",
        y_axis_label="MAE against the true rates",
        tools="pan,wheel_zoom,box_zoom,reset,save",
    )
    colors = {}
    for i, (name, trace) in enumerate(traces.groupby("trace", sort=False)):
        trace = trace.sort_values("seconds")
        colors[name] = Category10_10[i % 10]
        plot.line(
            trace["seconds"].clip(lower=1e-4),
            trace["rate_mae"],
            color=colors[name],
            line_width=2,
            line_dash="dashed" if trace["kind"].iloc[0] == "vi" else "solid",
            legend_label=name,
            alpha=0.8,
        )
    source = ColumnDataSource(
        {
            "seconds": [max(row["seconds"], 1e-4) for row in summary],
            "mae": [row["mae"] for row in summary],
            "paper": [row["paper_mae"] for row in summary],
            "row": [row["row"] for row in summary],
            "iterations": [str(row["iterations_run"]) for row in summary],
            "color": [colors.get(row["method"], "gray") for row in summary],
        }
    )
    markers = plot.scatter("seconds", "mae", source=source, size=11, color="color", line_color="black")
    plot.add_tools(
        HoverTool(
            renderers=[markers],
            tooltips=[
                ("row", "@row"),
                ("lpviz MAE", "@mae{0.000}"),
                ("paper MAE", "@paper{0.000}"),
                ("seconds", "@seconds{0.0}"),
                ("iterations", "@iterations"),
            ],
        )
    )
    plot.legend.location = "top_right"
    plot.legend.click_policy = "hide"
    plot.legend.label_text_font_size = "8pt"
    return _save_html(plot, path, title)
